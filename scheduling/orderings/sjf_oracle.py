"""``sjf-oracle``: shortest job first on the *recorded* run time (``trace_duration_s``).

NOT deployable: it reads the duration the trace recorded, which no real scheduler knows
when a job is submitted. It is a reference point to report beside the deployable
orderings — how much an ordering could gain from perfect duration knowledge (SJF
minimises mean completion time on one machine when all jobs are present; in a cluster
with multi-resource jobs it is a strong heuristic bound, not a proven one).

A gang's duration is the longest known duration of its members (it holds its resources
until the slowest finishes). Jobs without a recorded duration go last, in FIFO order.
Ties on duration → FIFO (submit time, job id).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.orderings.base import Unit, sort_units
from scheduling.orderings.registry import register_ordering


def oracle_duration(unit: Unit) -> float | None:
    known = [j.trace_duration_s for j in unit if j.trace_duration_s is not None]
    return max(known) if known else None


def _key(unit: Unit) -> tuple[bool, float]:
    d = oracle_duration(unit)
    return (d is None, 0.0 if d is None else d)


@register_ordering("sjf-oracle")
class SjfOracle:
    name = "sjf-oracle"

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        return sort_units(jobs, _key)
