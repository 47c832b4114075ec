"""SIGTERM to a parent inside ``sigterm_as_interrupt`` runs its ``finally`` (where the demo
stops its children) instead of ending it on the spot."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import sys, time
from pathlib import Path
from ops.processes import sigterm_as_interrupt
mark = Path(sys.argv[1])
with sigterm_as_interrupt():
    try:
        mark.write_text("started")
        time.sleep(60)
    finally:
        mark.write_text("cleaned up")
"""


def _run_and_terminate(tmp_path: Path, script: str) -> str:
    mark = tmp_path / "mark"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", script, str(mark)], cwd=root)
    try:
        for _ in range(200):
            if mark.exists():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    finally:
        proc.kill()
    return mark.read_text()


def test_sigterm_runs_the_cleanup(tmp_path: Path) -> None:
    assert _run_and_terminate(tmp_path, SCRIPT) == "cleaned up"


def test_without_it_sigterm_skips_the_cleanup(tmp_path: Path) -> None:
    plain = SCRIPT.replace("with sigterm_as_interrupt():", "if True:")
    assert _run_and_terminate(tmp_path, plain) == "started"
