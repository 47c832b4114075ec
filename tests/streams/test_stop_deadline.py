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
