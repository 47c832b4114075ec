"""The policy contract: queue order plus a vectorised node score.

``order(jobs, now, context)`` decides which pending job is considered first (``context``:
an :class:`~scheduling.order_context.OrderContext` or ``None``); ``score(job,
snapshot, feasible_mask)`` returns one float per node (higher is better; entries outside
``feasible_mask`` are ignored, ``-inf`` vetoes a node). Scores are computed for all
nodes at once with numpy — never a Python loop over nodes. A policy may also define
``select_gpus(snapshot, node_index, job) -> tuple[int, ...] | None`` to choose the GPUs
inside the chosen node (default: :func:`scheduling.gpu_select.select_gpus`, best-fit per GPU),
and then ``forget(snapshot, node_index, job)``, which a placement that is rolled back (a gang
that does not fit whole, a preemption probe) calls after it freed the GPUs ``select_gpus`` chose:
a policy that keeps state about its placements (``gpu-clustering``) takes the placement out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.snapshot import ClusterSnapshot


@runtime_checkable
class Policy(Protocol):
    name: str

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]: ...

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray: ...


def fifo_key(job: JobRequest) -> tuple[float, str]:
    """Submit time, then job id (deterministic across restarts)."""
    return (job.submit_time, job.job_id)


class BasePolicy:
    """FIFO ordering; subclasses implement :meth:`score`."""

    name: ClassVar[str] = "base"

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        return sorted(jobs, key=fifo_key)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<policy {self.name}>"
