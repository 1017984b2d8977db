"""Benchmark for tracegraph at scale (not part of the installed package).

* ``python -m bench.generate --ops 100000`` writes a synthetic TF StepStats
  trace (text ``.pbtxt`` and binary ``.pb``) to ``bench/out/``;
* ``python -m bench.run`` generates (cached) traces of 1k, 10k and 100k ops
  and measures ingest, catalog analyses and CLI calls; see ``bench/RESULTS.md``.

Run both from the repository root with the project's virtualenv.
"""
