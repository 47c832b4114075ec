"""When a process started, so that a PID written to a file names one process, not whichever reuses its
number later (``streams/web_address.py`` for the worker's port file; ``ops.processes`` for its PID files)."""

from __future__ import annotations

from pathlib import Path


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc/<pid>/stat field 22), or None when it is
    gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in {"Z", "X"} else int(fields[19])
