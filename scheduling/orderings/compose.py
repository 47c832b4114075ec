"""``ComposedPolicy``: an ordering's queue order with a placement policy's node scores.

``get_policy("drf+best-fit")`` (:mod:`scheduling.policies.registry`) builds one: ``order``
is the ordering's, ``score`` and ``select_gpus`` the placement's, ``name`` the composed
name (it appears in every placement reason). Any other attribute is looked up on the
placement, so a placement's own knobs (``.weights`` …) stay reachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduling.gpu_select import select_gpus
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.orderings.base import Ordering
from scheduling.policies.base import Policy
from scheduling.snapshot import ClusterSnapshot


class ComposedPolicy:
    """``order`` from ``ordering``, ``score`` / ``select_gpus`` from ``placement``.

    A placement that keeps per-step state (the learned one: one model call per step) defines
    ``begin_step(ordered, now)``; it is told the step's order here, as its own ``order`` would.
    """

    def __init__(self, ordering: Ordering, placement: Policy) -> None:
        self.ordering = ordering
        self.placement = placement
        self.name = f"{ordering.name}+{placement.name}"

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ordered = self.ordering.order(jobs, now, context)
        begin = getattr(self.placement, "begin_step", None)
        if begin is not None:
            begin(ordered, now)
        return ordered

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        return self.placement.score(job, snapshot, feasible_mask)

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        choose = getattr(self.placement, "select_gpus", None) or select_gpus
        return choose(snapshot, node_index, job)

    def __getattr__(self, attr: str) -> Any:
        if attr in ("ordering", "placement") or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.placement, attr)

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


def queue_order(policy: Policy | ComposedPolicy, jobs: Sequence[JobRequest], now: float,
                context: OrderContext | None = None) -> list[JobRequest]:  # fmt: skip
    """The order ``policy.order`` gives ``jobs``, without starting a step: a placement that keeps
    per-step state (``begin_step``) is not told. The worker hands it to a model-backed placement's
    ``prepare_step``, which calls its model for the head of the queue."""
    if isinstance(policy, ComposedPolicy):
        return policy.ordering.order(jobs, now, context)
    peek = getattr(policy, "queue_order", None)  # a placement whose own order() starts a step says it apart
    return peek(jobs, now, context) if peek is not None else policy.order(jobs, now, context)
