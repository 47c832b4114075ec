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
from pathlib import Path

PORT_FILE = "worker.port"


def advertise(state_dir: Path, port: int) -> None:
    """Write ``port`` for this state directory (no-op for a worker without a web server)."""
    if port > 0:
        (state_dir / PORT_FILE).write_text(f"{port}\n")


def withdraw(state_dir: Path, port: int) -> None:
    """Remove the file if it still names ``port`` (another worker may have written it since)."""
    with contextlib.suppress(OSError):
        if advertised_port(state_dir) == port:
            (state_dir / PORT_FILE).unlink()


def advertised_port(state_dir: Path) -> int | None:
    """The port a worker on ``state_dir`` wrote, or ``None`` (no file, or not a port)."""
    try:
        port = int((state_dir / PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None
