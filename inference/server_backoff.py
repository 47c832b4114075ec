"""Back off from a model server that keeps failing.

Each step asks the model server (Triton) once and waits at most its deadline, then the fallback
heuristic decides the step. With the server hung or unreachable that wait came at every step of
every cluster, one after another under the loop's lock: a tick of K clusters took about K deadlines,
for as long as the server stayed down (found by review). After ``BACKOFF_AFTER`` failed steps in a
row, the fallback decides at once, without asking the server, for 1 s, then 2 s, 4 s, … up to
``BACKOFF_MAX_S``; then one step asks again, and an answer ends the back-off. Its decisions say why.

Only the server's failures count (:class:`~inference.backends.BackendError`, a missed deadline):
not inputs this worker could not build, which a healthy server could not have helped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

BACKOFF_AFTER = 3  # failed steps in a row before the server is left alone for a while
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0


@dataclass
class ServerBackoff:
    failures: int = 0  # failed steps in a row
    until: float = 0.0  # no call before this (``clock``'s time)
    last: str = ""  # the last failure's reason
    clock: Callable[[], float] = field(default=time.monotonic)

    def holding(self) -> str | None:
        """The reason the fallback decides this step without asking the server, or None: ask it."""
        left = self.until - self.clock()
        if left <= 0:
            return None
        return (f"the model server failed {self.failures} steps in a row (last: {self.last}); "
                f"not asked again for {left:.1f}s")  # fmt: skip

    def failed(self, reason: str) -> None:
        self.failures += 1
        self.last = reason
        if self.failures >= BACKOFF_AFTER:
            self.until = self.clock() + min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (self.failures - BACKOFF_AFTER))

    def answered(self) -> None:
        self.failures, self.until, self.last = 0, 0.0, ""
