"""How fast XPlane captures are decoded (the protobuf alone) and parsed
(decoded and assembled into frames).

``python -m bench.xplane_decode [--repeat 3000] [--out DIR]`` times the
committed captures of tests/data/xplane, and a big one made from
jax_train_step.xplane.pb.gz by repeating every line's events ``--repeat``
times, one run after another in time (the protobuf runtime over
tests/data/xplane/make_reference.py's schema writes it: about 6.5 KB per
repeat). It prints, per capture, its size, the least CPU seconds of a few
decodes and of one or more parses, and the decode rate.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XPLANE = ROOT / "tests" / "data" / "xplane"


def big_capture(name: str, repeat: int) -> bytes:
    """Capture ``name`` with each line's events repeated ``repeat`` times,
    each copy after the last in time (the HLO and metadata unchanged)."""
    sys.path.insert(0, str(XPLANE))
    import make_reference  # the protobuf runtime's XSpace class

    space = make_reference.XSpace()
    space.ParseFromString(gzip.decompress((XPLANE / name).read_bytes()))
    for plane in space.planes:
        for line in plane.lines:
            events = list(line.events)
            if not events:
                continue
            span = max(e.offset_ps + e.duration_ps for e in events) + 1000
            for k in range(1, repeat):
                for e in events:
                    copy = line.events.add()
                    copy.CopyFrom(e)
                    if copy.WhichOneof("data") == "offset_ps":
                        copy.offset_ps = e.offset_ps + k * span
    data: bytes = space.SerializeToString()
    return data


def least_cpu(run: Callable[[], object], times: int) -> float:
    """The least CPU seconds of ``times`` runs (garbage collection off while timed)."""
    best = float("inf")
    for _ in range(times):
        gc.collect()
        gc.disable()
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
        gc.enable()
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3000, help="copies of jax_train_step's events in the big capture")
    p.add_argument("--out", type=Path, default=Path("/tmp/xplane-bench"), help="where the big capture is written")
    args = p.parse_args(argv)
    from tracegraph.ingest.formats.xplane import trace
    from tracegraph.ingest.formats.xplane.schema import read_space

    args.out.mkdir(parents=True, exist_ok=True)
    big = args.out / f"jax_train_step_x{args.repeat}.xplane.pb"
    if not big.exists():
        big.write_bytes(big_capture("jax_train_step.xplane.pb.gz", args.repeat))
    paths = [*sorted(XPLANE.glob("*.xplane.pb.gz")), big]
    print(f"{'capture':40} {'MB':>7} {'decode s':>9} {'MB/s':>6} {'parse s':>8}")
    for path in paths:
        data = trace.read_bytes(path)
        small = len(data) < 1 << 20
        decode = least_cpu(lambda data=data: read_space(data), 20 if small else 3)
        parse = least_cpu(lambda path=path: trace.parse(path), 5 if small else 1)
        mb = len(data) / 1e6
        print(f"{path.name:40} {mb:7.2f} {decode:9.4f} {mb / decode:6.1f} {parse:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
