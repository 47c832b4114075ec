"""What a killed run leaves behind is stopped by the next one, by PID, and only if the PID
is still one of ours."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ops.local_stack import stop_leftovers


def _spawn(tag: str) -> subprocess.Popen:  # type: ignore[type-arg]
    """A sleeping child whose command line carries ``tag``, returned once /proc shows it: Popen
    returns when exec has closed the child's close-on-exec pipe, a moment before the kernel sets up
    the new command line (a CI run read it empty there, and the child was not recognised)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag], start_new_session=True)
    for _ in range(100):
        if tag.encode() in Path(f"/proc/{p.pid}/cmdline").read_bytes():
            break
        time.sleep(0.05)
    return p


def test_leftover_children_are_stopped_and_strangers_are_not(tmp_path: Path) -> None:
    ours, stranger = _spawn("ops.cli.main"), _spawn("someone-else")
    try:
        (tmp_path / "worker.pid").write_text(str(ours.pid))
        (tmp_path / "agents.pid").write_text(str(stranger.pid))
        stop_leftovers(tmp_path)
        for _ in range(50):
            if ours.poll() is not None:
                break
            time.sleep(0.1)
        assert ours.poll() is not None
        assert stranger.poll() is None
    finally:
        for p in (ours, stranger):
            p.kill()
            p.wait()
