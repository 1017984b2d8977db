"""Whether a process still runs, for the things a dead process leaves
behind: the embedded server's socket file, a job's spill directory."""

from __future__ import annotations

import os
from pathlib import Path


def runs(pid: int) -> bool:
    """Does process ``pid`` run? A zombie (exited, not yet waited for by
    the process that started it) does not: on Linux its state in /proc
    says so; elsewhere a zombie counts as running. Another user's process
    runs as far as a signal can tell (it may not be sent one)."""
    if Path("/proc/self").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's
        return True
    return True
