"""``priority``: QoS class, then numeric priority (higher first), then FIFO.

QoS classes, most urgent first (``qos_order``, configurable):

1. ``LS`` — latency-sensitive services (Alibaba's class for online serving);
2. ``Guaranteed`` — Kubernetes pods whose requests equal their limits;
3. ``Burstable`` — Kubernetes pods with requests below their limits;
4. ``BE`` — best effort (batch, opportunistic).

A QoS value not in ``qos_order`` ranks after all of them. Within a class a higher
``priority`` goes first (Kubernetes PriorityClass / Google-trace convention), then
submit time, then job id. A gang ranks by its most urgent member.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.orderings.base import Unit, sort_units
from scheduling.orderings.registry import register_ordering

QOS_ORDER: tuple[str, ...] = ("LS", "Guaranteed", "Burstable", "BE")


@register_ordering("priority")
class PriorityQos:
    name = "priority"

    def __init__(self, qos_order: Sequence[str] = QOS_ORDER) -> None:
        if len(set(qos_order)) != len(qos_order):
            raise ValueError(f"priority: qos_order has duplicates: {list(qos_order)}")
        self.qos_rank = {q: i for i, q in enumerate(qos_order)}

    def _key(self, unit: Unit) -> tuple[int, int]:
        unknown = len(self.qos_rank)
        # its most urgent member's (QoS, priority), one member's both (found by review: the best QoS of one member
        # and the highest priority of another put a gang of (LS, 0) and (BE, 10) ahead of a single (LS, 5))
        return min((self.qos_rank.get(j.qos, unknown), -j.priority) for j in unit)

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        return sort_units(jobs, self._key)
