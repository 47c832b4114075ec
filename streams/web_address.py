"""Where a running worker's web server listens, for the CLI on the same machine.

A worker writes its web port to ``<state dir>/worker.port`` when it starts and removes it when
it stops. ``semsched sql`` / ``explain`` / ``models`` read it when ``SEMSCHED_WEB_PORT`` is not
set, so they find the worker that owns the state directory they were pointed at: the demo's
worker listens on a free port of its own (``SEMSCHED_STATE_DIR=.state/demo semsched sql …``
while the demo runs). A file left by a killed worker only costs one refused connection: the
CLI then opens the archive itself.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from streams.process_start import start_ticks

PORT_FILE = "worker.port"


def advertise(state_dir: Path, port: int) -> None:
    """Write ``port`` and this process's PID for this state directory (no-op for a worker without a
    web server), unless the file names another live process: a second worker on the same directory,
    which will fail, must not take the running one's place (found by the ops review: it did, then
    removed the file, and ``semsched sql`` said a worker owned the archive and to stop it)."""
    if port <= 0:
        return
    owner = _advertised(state_dir)
    if owner is not None and owner[1] not in (None, os.getpid()) and _alive(owner[1], owner[2]):
        return
    (state_dir / PORT_FILE).write_text(f"{port} {os.getpid()} {start_ticks(os.getpid()) or 0}\n")


def withdraw(state_dir: Path, port: int) -> None:
    """Remove the file if it is this process's, for ``port``."""
    with contextlib.suppress(OSError):
        if (_advertised(state_dir) or ())[:2] == (port, os.getpid()):
            (state_dir / PORT_FILE).unlink()


def advertised_port(state_dir: Path) -> int | None:
    """The port a worker on ``state_dir`` wrote, or ``None`` (no file, or not a port)."""
    got = _advertised(state_dir)
    return None if got is None else got[0]


def _advertised(state_dir: Path) -> tuple[int, int | None, int | None] | None:
    """``(port, pid, start ticks)`` from the file (``pid`` and ``ticks`` None in a file of an older worker),
    or None."""
    try:
        fields = [int(x) for x in (state_dir / PORT_FILE).read_text().split()]
    except (OSError, ValueError):
        return None
    if not fields or not 0 < fields[0] < 65536:
        return None
    return fields[0], fields[1] if len(fields) > 1 else None, fields[2] if len(fields) > 2 and fields[2] else None


def _alive(pid: int, ticks: int | None = None) -> bool:
    """Whether the worker that wrote the file runs: ``pid`` with the start ``ticks`` it wrote (found by review:
    a killed worker's PID reused by another process kept its file, and the next worker never advertised)."""
    if ticks is not None:
        return start_ticks(pid) == ticks
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
