"""Ad-hoc Cypher reads the trace graph and nothing else (issue 46), on
both engines, decided from the database's own plan of the statement
(queries/ad_hoc_rule.py).

Each statement of :data:`EVASIONS` is what an attacker holding an API key
would send: the forbidden thing dressed up (case, comments, backticks,
escapes, line breaks, ``CALL {}`` wrapping, ``UNION``, ``EXPLAIN`` /
``PROFILE`` prefixes, several statements, ``USE``). Each is refused
before it runs: by the rule with its one line (``NotAllowed``: 403, exit
1), or, where the database cannot even plan it (FalkorDB has no ``SHOW``,
no ``USE``, no ``IN TRANSACTIONS``), with the database's own one-line
error; no URL is fetched either way (a local web server counts what
reaches it). Every canned analysis, the guide's statements and ordinary
reads pass the rule and answer as before.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from conftest import cli_here

from tracegraph.errors import NotAllowed, QueryError

# (statement, what Neo4j's refusal says, what FalkorDB's says; None: the
# database's own error, the statement cannot be planned there). {url} is
# the local web server's address.
EVASIONS: list[tuple[str, str | None, str | None]] = [
    ("LOAD CSV FROM '{url}/x.csv' AS l RETURN l", "LOAD CSV is not allowed", "LOAD CSV is not allowed"),
    ("load csv from '{url}/x.csv' as l return l", "LOAD CSV is not allowed", "LOAD CSV is not allowed"),
    ("LOAD /* hidden */ CSV FROM '{url}/x.csv' AS l RETURN l", "LOAD CSV is not allowed", "LOAD CSV is not allowed"),
    (
        "// a comment\nLOAD\nCSV\nFROM '{url}/x.csv' AS l\nRETURN l",
        "LOAD CSV is not allowed",
        "LOAD CSV is not allowed",
    ),
    ("LOAD CSV WITH HEADERS FROM '{url}/x.csv' AS l RETURN l", "LOAD CSV is not allowed", "LOAD CSV is not allowed"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l", "LOAD CSV is not allowed", "LOAD CSV is not allowed"),
    (
        "WITH '{url}' AS u LOAD CSV FROM u + '/x.csv' AS l RETURN l",
        "LOAD CSV is not allowed",
        "LOAD CSV is not allowed",
    ),
    (
        "CALL { LOAD CSV FROM '{url}/x.csv' AS l RETURN l } RETURN l",
        "LOAD CSV is not allowed",
        "LOAD CSV is not allowed",
    ),
    (
        "MATCH (n) RETURN 1 AS l LIMIT 1 UNION LOAD CSV FROM '{url}/x.csv' AS r RETURN 2 AS l",
        "LOAD CSV is not allowed",
        "LOAD CSV is not allowed",
    ),
    ("EXPLAIN LOAD CSV FROM '{url}/x.csv' AS l RETURN l", "LOAD CSV is not allowed", "LOAD CSV is not allowed"),
    ("PROFILE LOAD CSV FROM '{url}/x.csv' AS l RETURN l", None, None),
    ("CALL dbms.listConfig()", "procedure dbms.listConfig is not allowed", None),
    ("call DBMS.LISTCONFIG()", None, None),
    ("CALL `dbms`.`listConfig`() YIELD name RETURN name", "procedure dbms.listConfig is not allowed", None),
    ("CALL dbms.listConnections()", "procedure dbms.listConnections is not allowed", None),
    ("CALL dbms.info()", "procedure dbms.info is not allowed", None),
    ("CALL db.info()", "procedure db.info is not allowed", None),
    ("CALL dbms.procedures()", None, "procedure dbms.procedures is not allowed"),
    (
        "CALL db.labels() YIELD label WITH label CALL dbms.listConfig() YIELD name RETURN name",
        "procedure dbms.listConfig is not allowed",
        None,
    ),
    (
        "CALL { CALL dbms.listConfig() YIELD name RETURN name } RETURN name",
        "procedure dbms.listConfig is not allowed",
        None,
    ),
    (
        "RETURN 'CALL db.labels()' AS s UNION CALL dbms.info() YIELD id RETURN id AS s",
        "procedure dbms.info is not allowed",
        None,
    ),
    ("CALL /* db.labels() */ db.meta.stats()", None, "procedure db.meta.stats is not allowed"),
    (
        "CALL db.labels() YIELD label RETURN label UNION CALL db.meta.stats() YIELD labels RETURN 'x' AS label",
        None,
        "procedure db.meta.stats is not allowed",
    ),
    ("SHOW USERS", "an administration command is not allowed", None),
    ("show databases", "an administration command is not allowed", None),
    ("SHOW TRANSACTIONS", "SHOW TRANSACTIONS is not allowed", None),
    ("SHOW PROCEDURES", "SHOW PROCEDURES is not allowed", None),
    ("TERMINATE TRANSACTION 'neo4j-transaction-1'", "TERMINATE TRANSACTIONS is not allowed", None),
    ("CREATE USER mallory SET PASSWORD 'secret123'", "an administration command is not allowed", None),
    ("USE system SHOW USERS", None, None),
    ("USE system SHOW PROCEDURES", "an administration command is not allowed", None),
    ("USE system MATCH (n) RETURN n", None, None),
    ("UNWIND [1] AS x CALL { WITH x RETURN x AS y } IN TRANSACTIONS RETURN y", "IN TRANSACTIONS is not allowed", None),
    ("MATCH (n) RETURN n LIMIT 1; CALL dbms.listConfig()", None, None),
    ("CALL dbms.listConfig(); MATCH (n) RETURN n", None, None),
    ("CALL apoc.load.json('{url}/x.json')", None, None),
]


class Counting(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b"a,b\n1,2\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A local web server's address; Counting.hits counts what reached it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("statement", "neo4j_says", "falkordb_says"), EVASIONS, ids=range(len(EVASIONS)))
def test_an_evasion_is_refused_before_it_runs(graph, alexnet, url, statement, neo4j_says, falkordb_says):
    from tracegraph.queries.cypher import run_cypher

    said = neo4j_says if graph.backend == "neo4j" else falkordb_says
    before = Counting.hits
    for trace in (alexnet, None):  # (FalkorDB: the trace's graph, and the catalog's)
        with pytest.raises(QueryError) as caught:
            run_cypher(graph, statement.replace("{url}", url), trace=trace)
        message = str(caught.value)
        assert "\n" not in message
        if said is None:
            assert not isinstance(caught.value, NotAllowed) or "is not allowed in ad-hoc queries" in message
        else:
            assert isinstance(caught.value, NotAllowed), message
            assert said in message and message.endswith(("in ad-hoc queries", ")")), message
    assert Counting.hits == before  # nothing reached the URL


def test_there_are_enough_evasions():
    assert len(EVASIONS) >= 25


def test_a_refusal_on_the_command_line_is_one_line_and_exit_1(db_uri, alexnet, url):
    proc = cli_here("cypher", f"LOAD CSV FROM '{url}/x.csv' AS l RETURN l", "--trace", alexnet, db=db_uri)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["tracegraph: error: LOAD CSV is not allowed in ad-hoc queries"], (
        proc.stderr
    )


LEGITIMATE = [
    ("MATCH (o:Op {trace: $trace}) RETURN count(o) AS ops", lambda rows: rows == [[118]]),
    ("MATCH (o:Op {trace: $trace}) WHERE o.name STARTS WITH 'conv' RETURN o.name ORDER BY o.name LIMIT 2", None),
    ("CALL db.labels() YIELD label RETURN label ORDER BY label", lambda rows: ["Op"] in rows),
    ("CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType", None),
    ("CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey", None),
    ("CALL { MATCH (o:Op {trace: $trace}) RETURN o.name AS n ORDER BY n LIMIT 1 } RETURN n", None),
    ("MATCH (o:Op {trace: $trace}) RETURN 'CALL dbms.listConfig()' AS text LIMIT 1", None),
    ("// LOAD CSV in a comment only\nMATCH (t:Trace {trace: $trace}) RETURN t.trace", lambda rows: len(rows) == 1),
    ("UNWIND range(1, 3) AS x RETURN sum(x) AS s", lambda rows: rows == [[6]]),
]


@pytest.mark.parametrize(("statement", "expect"), LEGITIMATE, ids=range(len(LEGITIMATE)))
def test_an_ordinary_read_answers(graph, alexnet, statement, expect):
    from tracegraph.queries.cypher import run_cypher

    res = run_cypher(graph, statement, trace=alexnet)
    if expect is not None:
        assert expect(res.rows), res.rows


def _values(analysis, trace: str) -> dict:
    """Values for every parameter (a required one: a value of its type)."""
    sample = {"STRING": "x", "INTEGER": 0, "FLOAT": 0.0, "BOOLEAN": False, "TRACE": trace}
    out = {}
    for p in analysis.params:
        if p.is_trace:
            out[p.name] = trace
        elif p.default is not None:
            out[p.name] = p.default
        else:
            out[p.name] = p.choices[0] if p.choices else sample[p.type]
    return out


def test_every_canned_analysis_and_the_guides_statements_pass_the_rule(graph, alexnet):
    from tracegraph.queries import ad_hoc_rule, guide
    from tracegraph.queries.catalog import catalog

    texts = [(a.text, _values(a, alexnet), a.compares_traces) for a in catalog().values()]
    texts += [(q, {"trace": alexnet}, False) for q in guide._SAMPLES.values()]
    assert len(texts) > 20
    for text, params, across in texts:
        ad_hoc_rule.check(graph.plan(text, params, trace=None if across else alexnet))


def test_a_step_on_another_database_is_refused():
    """Neo4j names the database each operator runs on (``@name``): one
    other than the statement's own is a ``USE`` of it (a composite
    database's constituent, say), refused whatever the operator."""
    from tracegraph.db.neo4j_db import plan_steps
    from tracegraph.queries import ad_hoc_rule

    plan = {
        "operatorType": "ProduceResults@neo4j",
        "args": {"Details": "n"},
        "children": [{"operatorType": "AllNodesScan@other", "args": {"Details": "n"}, "children": []}],
    }
    with pytest.raises(NotAllowed, match=r"^a statement on database 'other' is not allowed in ad-hoc queries \(USE\)$"):
        ad_hoc_rule.check(plan_steps(plan, "neo4j"))
    ad_hoc_rule.check(plan_steps(plan | {"children": []}, "neo4j"))


def test_falkordb_procedure_names_are_believed_only_when_they_add_up():
    """FalkorDB's plan says ``ProcedureCall`` without the name: the names
    read from the text count only when there are as many as calls."""
    from tracegraph.db.falkor_plan import called_procedures, plan_steps

    assert called_procedures("CALL db.labels() YIELD label CALL `db`.`propertyKeys`()") == [
        "db.labels",
        "db.propertyKeys",
    ]
    assert called_procedures("RETURN 'CALL dbms.x()' // CALL a.b()\n/* CALL c.d() */ CALL { RETURN 1 }") == []
    assert called_procedures("RETURN 'unclosed") is None
    one_call = ["Results", "    ProcedureCall"]
    assert plan_steps(one_call, "CALL db.labels()")[1].name == "db.labels"
    # the lexer sees two calls, the plan one: every call unnamed, refused
    assert plan_steps(one_call, "CALL db.labels() CALL db.labels()")[1].name == ""
    with pytest.raises(NotAllowed, match="a procedure call whose procedure cannot be named"):
        from tracegraph.queries import ad_hoc_rule

        ad_hoc_rule.check(plan_steps(one_call, "CALL db.labels() CALL db.labels()"))
