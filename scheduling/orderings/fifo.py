"""``fifo``: first come, first served — submit time, then job id.

The order every plain placement policy already uses (:class:`~scheduling.policies.base.BasePolicy`),
here gang-aware: a gang goes where its earliest member would.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.orderings.base import sort_units
from scheduling.orderings.registry import register_ordering


@register_ordering("fifo")
class Fifo:
    name = "fifo"

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        return sort_units(jobs, lambda unit: 0)
