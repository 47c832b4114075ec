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


def test_cpu_seconds_tells_the_busy_main_thread_from_an_idle_process(tmp_path: Path) -> None:
    """The worker's CPU in `bench pipeline`: a child that spins its main thread for about half a second
    shows it there and in the process; one that spins another thread, in the process only; an idle
    child shows next to none; a gone one, None."""
    from ops.processes import cpu_seconds

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\ntime.sleep(30)"
    side = ("import threading, time\ndef f():\n    t = time.thread_time()\n    while time.thread_time() - t < 0.5: pass\n"
            "threading.Thread(target=f).start()\ntime.sleep(30)")  # fmt: skip
    busy = subprocess.Popen([sys.executable, "-c", spin])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    other = subprocess.Popen([sys.executable, "-c", side])  # busy on a thread that is not the main one
    try:
        deadline = time.time() + 20
        while (used := cpu_seconds(busy.pid)) is not None and used[1] < 0.5 and time.time() < deadline:
            time.sleep(0.05)
        # (the process's count includes the main thread's; the kernel scales each to the tick on its own, so
        # they may differ by a tick or two: found flaky under load)
        assert used is not None and used[1] >= 0.5 and used[0] >= used[1] - 0.02, used
        quiet = cpu_seconds(idle.pid)
        assert quiet is not None and quiet[1] < 0.4, quiet
        while (aside := cpu_seconds(other.pid)) is not None and aside[0] < 0.5 and time.time() < deadline:
            time.sleep(0.05)
        assert aside is not None and aside[0] >= 0.5 and aside[1] < 0.4, aside
    finally:
        for p in (busy, idle, other):
            p.kill()
            p.wait(10)
    assert cpu_seconds(busy.pid) is None
