"""streams/stop_deadline.py: a process told to stop is gone within the stop time-out, whatever holds it."""

from __future__ import annotations

import subprocess
import sys
import time

HELD = """
import time
from streams.stop_deadline import arm_stop_deadline
assert arm_stop_deadline({seconds}, "worker", before_exit=lambda: print("withdrawn", flush=True))
assert not arm_stop_deadline(0.1, "worker")  # armed once: a second signal changes nothing
time.sleep(30)  # a stop that never ends (a commit waiting on a producer whose broker is gone)
print("stopped cleanly", flush=True)
"""


def test_a_stop_that_hangs_ends_in_exit_1_with_its_reason_after_the_time_out() -> None:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", HELD.format(seconds=1.0)], capture_output=True, text=True,
                          timeout=60, cwd=".")  # fmt: skip
    took = time.monotonic() - t0
    assert done.returncode == 1, done
    assert "stopped cleanly" not in done.stdout and "withdrawn" in done.stdout
    assert "semsched worker: still stopping 1 s after it was told to stop (SEMSCHED_STOP_TIMEOUT)" in done.stderr
    assert took < 25, f"the process lived {took:.0f} s"


def test_a_time_out_of_zero_never_gives_up() -> None:
    from streams.stop_deadline import arm_stop_deadline

    assert arm_stop_deadline(0, "worker") is False


CRASHED = """
import asyncio
import mode
from mode.worker import Worker
from streams.stop_deadline import StopDeadlineWorker

class Crashing(mode.Service):  # a service that crashes (a failed commit), then hangs in its stop
    async def on_started(self) -> None:
        self.add_future(self._crash_soon())

    async def _crash_soon(self) -> None:
        await asyncio.sleep(0.3)
        await self.crash(RuntimeError("a commit failed"))

    async def on_stop(self) -> None:
        await asyncio.sleep(30)  # (the producer's flush with the broker gone)

class W(StopDeadlineWorker, Worker):
    pass

w = W(Crashing(), loglevel="warning", quiet=True)
w.stop_timeout_s = 1.0
w.execute_from_commandline()
"""


def test_a_worker_whose_service_crashed_and_whose_stop_hangs_is_gone_after_the_time_out_too() -> None:
    """No signal at all: the deadline is armed when the stop starts (found by review)."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CRASHED], capture_output=True, text=True, timeout=60, cwd=".")
    took = time.monotonic() - t0
    assert done.returncode == 1, done
    assert "still stopping 1 s after it was told to stop" in done.stderr, done.stderr[-2000:]
    assert took < 25, f"the process lived {took:.0f} s"
