"""The compiler's code pages leave the resident set after a kernel loads,
and kernels still load and answer right afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracegraph.compiler_pages import clean_mappings

ROOT = Path(__file__).resolve().parents[1]


def test_only_clean_read_only_mappings_of_files_under_the_folder_are_chosen(tmp_path):
    lib = tmp_path / "pkg" / "libbig.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")

    def mapping(lo: int, hi: int, perms: str, path: str, dirty_kb: int = 0, anon_kb: int = 0, swap_kb: int = 0) -> str:
        return (
            f"{lo:x}-{hi:x} {perms} 00000000 fd:01 42 {path}\n"
            "Size:                 16 kB\n"
            "Rss:                  16 kB\n"
            f"Private_Dirty:        {dirty_kb} kB\n"
            "Shared_Dirty:          0 kB\n"
            f"Anonymous:            {anon_kb} kB\n"
            f"Swap:                 {swap_kb} kB\n"
            "VmFlags: rd ex mr mw me\n"
        )

    smaps = tmp_path / "smaps"
    smaps.write_text(
        mapping(0x1000, 0x5000, "r--p", str(lib))  # clean read-only data: chosen
        + mapping(0x5000, 0x9000, "r-xp", str(lib))  # code: chosen
        + mapping(0x9000, 0xA000, "r--p", str(lib), dirty_kb=4)  # relocated (dirty): left
        + mapping(0xD000, 0xE000, "r--p", str(lib), anon_kb=4)  # relocated, swapped back in (clean): left
        + mapping(0xE000, 0xF000, "r--p", str(lib), swap_kb=4)  # relocated, swapped out: left
        + mapping(0xA000, 0xB000, "rw-p", str(lib))  # writable: left
        + mapping(0xB000, 0xC000, "r-xp", "/usr/lib/libc.so.6")  # another library: left
        + mapping(0xC000, 0xD000, "rw-p", "")  # anonymous: left
    )
    assert clean_mappings(lib.parent, str(smaps)) == [(0x1000, 0x4000), (0x5000, 0x4000)]
    assert clean_mappings(lib.parent, str(tmp_path / "no-such-file")) == []


_KERNELS = """
from tracegraph.columns import kernel


@kernel
def total(values):
    s = values[0] * 0
    for v in values:
        s += v
    return s
"""

_PROBE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np
    import llvmlite

    def resident_kb():
        from tracegraph.compiler_pages import clean_mappings
        chosen = {lo for lo, _ in clean_mappings(Path(llvmlite.__file__).parent)}
        total, inside = 0, False
        for line in open("/proc/self/smaps"):
            head = line.split()
            if "-" in head[0] and not line[0].isupper():
                inside = int(head[0].split("-")[0], 16) in chosen
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
        return total

    import numba  # its import runs LLVM's initializers: their pages are resident now
    before = resident_kb()
    sys.path.insert(0, sys.argv[1])
    from probe_kernels import total  # made by tracegraph.columns.kernel
    first = total(np.arange(10, dtype=np.int64))
    after_first = resident_kb()
    second = total(np.array([0.5, 0.25, 2.0]))  # another signature: a load after a release
    after_second = resident_kb()
    print(json.dumps({
        "before": before, "after_first": after_first, "after_second": after_second,
        "first": int(first), "second": float(second),
    }))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the release is Linux's madvise")
def test_a_kernel_load_leaves_the_compiler_library_out_of_the_resident_set_and_kernels_still_work(tmp_path):
    (tmp_path / "probe_kernels.py").write_text(_KERNELS)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=True
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # numba's import alone makes tens of MB of LLVM resident (measured: ~90 MB)
    assert out["before"] > 20_000, out
    # after the loads, what is resident of those mappings is a small part of that
    assert out["after_first"] < out["before"] / 4, out
    assert out["after_second"] < out["before"] / 4, out
    # and the kernels answered right, before and after a release (0 + 1 + ... + 9; 0.5 + 0.25 + 2)
    assert out["first"] == 45
    assert out["second"] == 2.75
