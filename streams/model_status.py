"""Which decides the worker's steps: the learned policy's model, or its fallback heuristic.

A model-backed policy (``learned``, ``<ordering>+learned``) says after every step whether its
model decided it or the fallback did, and why (``policy.last_step``, copied onto each decision
record). Records alone leave an operator blind while it happens: :class:`ModelStatus` logs a
warning when the steps start falling back (Triton down, a deadline missed, no model) and when
the model decides again, once per change, and keeps the current state for ``/status``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("semsched.model")


class ModelStatus:
    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.fallback: bool | None = None  # None: no model-backed step yet
        self.since = 0.0  # wall time of the last change
        self.reason = ""
        self.version = ""
        self.changes = 0

    def observe(self) -> None:
        """After a step that asked the model: log a change between model and fallback."""
        step = getattr(self.policy, "last_step", None)
        if step is None:
            return
        fallback = bool(step.fallback)
        self.reason, self.version = step.reason if fallback else "", str(step.version or "")
        if fallback == self.fallback:
            return
        heuristic = getattr(self.policy, "fallback_name", "the fallback heuristic")
        if fallback:
            log.warning("%s: steps now decided by %s, not the model (%s): %s", self.policy.name, heuristic,
                        step.backend or "no backend", step.reason)  # fmt: skip
        elif self.fallback is not None:
            log.warning("%s: the model decides again (%s, version %s)", self.policy.name, step.backend, self.version)
        self.fallback, self.since = fallback, time.time()
        self.changes += 1

    def as_dict(self) -> dict[str, Any]:
        """For ``/status``: ``fallback`` (None before the first model-backed step), since when, why."""
        return {"fallback": self.fallback, "since": self.since or None, "reason": self.reason,
                "version": self.version, "changes": self.changes}  # fmt: skip
