"""The routing scheme (``neo4j://``, what clusters and Aura use) against
the scratch server, and read-your-writes: every statement of a Graph
carries the bookmarks of the writes before it, so a read routed to
another cluster member waits until it has them."""

from __future__ import annotations

import pytest
from conftest import NEO4J_URI, NO_NEO4J, SEED_STEPSTATS

from tracegraph.db.connect import open_graph
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis
from tracegraph.queries.traces import describe_trace

pytestmark = pytest.mark.skipif(not NEO4J_URI, reason=NO_NEO4J)


def test_neo4j_scheme_ingests_and_reads_its_own_writes():
    assert NEO4J_URI is not None
    uri = "neo4j://" + NEO4J_URI.split("://", 1)[1]
    g = open_graph(uri)
    try:
        assert g.backend == "neo4j"
        ingest(g, [SEED_STEPSTATS], "routing-seed", replace=True)
        # The ingest's writes left bookmarks that every later session sends.
        assert g._bookmarks.get_bookmarks()  # type: ignore[attr-defined]
        facts = describe_trace(g, "routing-seed")
        assert facts.ops and facts.critical_path_us
        rows = run_analysis(g, "critical-path", "routing-seed").rows
        assert len(rows) == facts.critical_path_ops
        assert sum(r[3] for r in rows) == pytest.approx(facts.critical_path_us)
    finally:
        g.drop_trace("routing-seed")
        g.close()
