"""``StepBudget``: what is left of a remote backend's step deadline for the windows a step opens.

``SEMSCHED_TRITON_STEP_DEADLINE_MS`` bounds all of a step's model calls together
(:mod:`inference.serving.client`). The first window's call is awaited in ``prepare_step``: the event
loop keeps serving while it travels. A job past that window that reaches scoring opens the next
window (:mod:`inference.step_windows`) inside ``schedule_step``, synchronously: the worker's event
loop (heartbeats, agents, ``/status``) waits for as long as that call takes. So each later window is
charged here and given at most what is left as its deadline (its new texts' embedding and its
``policy`` call together); once nothing is left, the fallback heuristic decides the rest of the
step and the decision records say why (found by review: a slow server and a burst of 2,000
placements held the loop about 3.6 s, each of 7 later windows waiting up to its own 500 ms, and
with MiniLM each loaded the encoder and embedded its texts on the loop, outside any deadline).

In-process there is no budget: the windows' calls are this process's own work, bounded by the window.
A remote backend without a step deadline (``0``) has an endless one: each window's call is bounded by
its own deadline, its texts embedded by the server all the same. A window's failure (a missed
deadline that may have been a sliver of the step's) does not count against the server
(:mod:`inference.server_backoff`); the next step's first call does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

STEP_DEADLINE_ENV = "SEMSCHED_TRITON_STEP_DEADLINE_MS"  # (read by inference.serving.client, named here)
MIN_CALL_MS = 1.0  # less than this left: no window is called (no round trip fits in it)


class StepBudget:
    """A step's model time: ``budget_ms`` in all, ``spent_ms`` of it gone (the first window's call)."""

    def __init__(self, budget_ms: float, spent_ms: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget_ms = budget_ms
        self.spent_ms = spent_ms
        self.first_ms = spent_ms  # the prepared call's share (what the windows opened later add: spent - first)
        self.clock = clock
        self.windows = 1  # the step's calls charged so far (the first window's included)

    def left_ms(self) -> float:
        return self.budget_ms - self.spent_ms

    def open_window(self) -> float | None:
        """The moment (``clock``) by which the next window's calls must be done; None when nothing is left."""
        left = self.left_ms()
        return self.clock() + left / 1000.0 if left >= MIN_CALL_MS else None

    def charge(self, since: float) -> None:
        """A window's calls, begun at ``since`` (``clock``), are done (answered or failed)."""
        self.spent_ms += (self.clock() - since) * 1000.0
        self.windows += 1

    def ms_until(self, until: float) -> float:
        """The deadline (ms) of a call that must be done by ``until`` (below ``MIN_CALL_MS``: none is made)."""
        return (until - self.clock()) * 1000.0

    def spent_reason(self, backend: str) -> str:
        return (f"{backend}: the step's model calls took its whole {self.budget_ms:g} ms step deadline "
                f"({STEP_DEADLINE_ENV}) in {self.windows} window(s); the fallback decides the rest of the step")  # fmt: skip
