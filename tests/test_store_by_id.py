"""On FalkorDB the loader matches relationship ends by internal id (and
creates some relationships with their nodes); the stored graph must be the
one the key-matching loader (the Neo4j path) writes: same nodes, same
properties in the same order, same relationships with their properties."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

SEED = ROOT / "examples" / "traces" / "tf1-alexnet-stepstats.pbtxt"
VOLATILE = {"trace", "name", "ingested_at", "heartbeat"}  # differ between two loads by design (Trace node)


def dump(graph, trace: str):
    nodes = graph.run("MATCH (n {trace: $t}) RETURN labels(n)[0], properties(n)", {"t": trace}).rows
    rels = graph.run("MATCH (a {trace: $t})-[e]->(b) RETURN type(e), a.uid, b.uid, properties(e)", {"t": trace}).rows
    nodes = sorted((label, [(k, repr(v)) for k, v in props.items() if not (label == "Trace" and k in VOLATILE)
                            and k != "trace"]) for label, props in nodes)
    rels = sorted((t, a, b, sorted(p.items())) for t, a, b, p in rels)
    return nodes, rels


def test_by_id_loader_stores_the_same_graph(graph, tmp_path, monkeypatch):
    from tracegraph.ingest import load_falkor, store
    from tracegraph.ingest.enrich import enrich
    from tracegraph.ingest.pipeline import parse_files

    assert load_falkor.loads_by_id(graph)
    files = generate.write(generate.generate(300, seed=4), tmp_path)
    for path in (SEED, files["binary"]):
        tf = parse_files([path])
        summary = enrich(tf)
        by_id = store.write_trace(graph, tf, summary, f"byid-{path.stem}")
        with monkeypatch.context() as m:
            m.setattr(load_falkor, "loads_by_id", lambda g: False)
            by_key = store.write_trace(graph, tf, summary, f"bykey-{path.stem}")
        assert by_id == by_key and list(by_id["relationships"]) == list(by_key["relationships"])
        assert dump(graph, f"byid-{path.stem}") == dump(graph, f"bykey-{path.stem}")


def test_small_batches_and_one_in_flight(graph, monkeypatch):
    """Batch boundaries and the pipelining change nothing either."""
    from tracegraph.ingest import load_falkor, store
    from tracegraph.ingest.enrich import enrich
    from tracegraph.ingest.pipeline import parse_files

    tf = parse_files([SEED])
    summary = enrich(tf)
    store.write_trace(graph, tf, summary, "batches-default")
    monkeypatch.setattr(load_falkor, "FALKOR_BATCH_ROWS", 7)
    monkeypatch.setattr(load_falkor, "FALKOR_IN_FLIGHT", 1)
    store.write_trace(graph, tf, summary, "batches-small")
    assert dump(graph, "batches-default") == dump(graph, "batches-small")
