"""A process told to stop is gone within ``SEMSCHED_STOP_TIMEOUT`` seconds, cleanly or not.

A worker whose broker was gone did not stop on SIGTERM (measured: still running 200 s later):
Faust's stop commits the offsets, and the commit waits for the producer to deliver what it holds,
which aiokafka retries for ``producer_request_timeout`` (1,200 s). The simulated agents' stop
waits on their producer too (for up to ``BROKER_WAIT_S``, 300 s: ops/agents/simulated.py). The first signal to stop
now arms a timer on a thread of its own (the event loop may be the thing that is stuck): when it
runs out, the process says what it gives up on, in one line, and exits 1 at once. Nothing accepted
is lost by that: what it had not committed is read again by the next worker, as after a SIGKILL
(tests/integration/test_worker_restart.py).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("semsched.stop")

_armed: threading.Timer | None = None
_lock = threading.Lock()


def arm_stop_deadline(seconds: float, who: str, *, before_exit: Callable[[], None] | None = None) -> bool:
    """Start the countdown (the first call only; later calls, a second SIGTERM say, change nothing).
    ``seconds`` <= 0 never gives up. ``before_exit`` runs just before the forced exit (must be quick).
    True when this call armed it."""
    global _armed
    if seconds <= 0:
        return False
    with _lock:
        if _armed is not None:
            return False
        _armed = threading.Timer(seconds, _give_up, args=(seconds, who, before_exit))
        _armed.daemon = True
        _armed.start()
    return True


def _give_up(seconds: float, who: str, before_exit: Callable[[], None] | None) -> None:
    line = (f"semsched {who}: still stopping {seconds:g} s after it was told to stop (SEMSCHED_STOP_TIMEOUT): "
            "exiting now without a clean stop (is the broker reachable?); what it had not committed is "
            "read again at the next start")  # fmt: skip
    try:
        log.error(line)
        if before_exit is not None:
            before_exit()
        for handler in logging.getLogger().handlers:
            handler.flush()
        print(line, file=sys.__stderr__, flush=True)
    finally:
        os._exit(1)


class StopDeadlineWorker:
    """Mixin for a mode (Faust) ``Worker``: the deadline is armed by its first signal to stop, and by
    the start of its stop on any other way out (a crashed service: found by review, only a signal
    armed it; mode calls ``on_worker_shutdown`` before every stop of ``execute_from_commandline``).
    Set ``stop_timeout_s``, ``stop_who`` and ``before_stop_exit`` on the instance."""

    stop_timeout_s: float = 30.0
    stop_who: str = "worker"
    before_stop_exit: Callable[[], None] | None = None

    def _arm(self) -> None:
        arm_stop_deadline(self.stop_timeout_s, self.stop_who, before_exit=self.before_stop_exit)

    def _schedule_shutdown(self, signal: Any) -> None:
        self._arm()
        super()._schedule_shutdown(signal)  # type: ignore[misc]

    def on_worker_shutdown(self) -> None:
        self._arm()
        super().on_worker_shutdown()  # type: ignore[misc]
