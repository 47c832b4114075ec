"""``drf``: Dominant Resource Fairness across tenants (Ghodsi et al., NSDI 2011).

A tenant's *dominant share* is the largest of its shares of cpu, memory and GPU:
``max_r consumed_r / capacity_r``. DRF's progressive filling repeatedly serves the tenant
with the smallest dominant share. Here: ``consumed`` starts at what the tenant's running
jobs hold (``context.tenant_held``) and grows by the demand of each unit this call has
already put in the order (a tentative grant), so one call interleaves tenants the way
DRF would allocate them; inside a tenant, FIFO. ``schedule_step`` then places the order
greedily — on the DRF paper's example (9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's
<3 CPUs, 1 GB>) that gives A three tasks and B two.

Capacity is ``context.capacity``; a resource with capacity 0 (a cluster without GPUs)
counts for no one. Without any capacity (no context) the shares are taken of the total
held plus pending demand, which keeps the ordering meaningful in isolation.

Ties on dominant share → the tenant whose next job is earlier in FIFO order (submit time,
job id). A gang is granted as one unit (the sum of its members' demands) and belongs to
the tenant of its earliest member.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from scheduling.job import JobRequest
from scheduling.order_context import EMPTY_CONTEXT, OrderContext, Triple, demand
from scheduling.orderings.base import Unit, flatten, group_units, unit_fifo_key
from scheduling.orderings.registry import register_ordering


def unit_demand(unit: Unit) -> Triple:
    cpu = mem = gpu = 0.0
    for job in unit:
        c, m, g = demand(job)
        cpu, mem, gpu = cpu + c, mem + m, gpu + g
    return (cpu, mem, gpu)


def dominant_share(consumed: Sequence[float], capacity: Sequence[float]) -> float:
    """``max_r consumed_r / capacity_r`` over the resources with positive capacity (0 if none)."""
    return max((c / cap for c, cap in zip(consumed, capacity, strict=True) if cap > 0), default=0.0)


def _capacity(context: OrderContext, units: Sequence[Unit]) -> Triple:
    if any(c > 0 for c in context.capacity):
        return context.capacity
    total = [0.0, 0.0, 0.0]
    for held in context.tenant_held.values():
        total = [t + h for t, h in zip(total, held, strict=True)]
    for unit in units:
        total = [t + d for t, d in zip(total, unit_demand(unit), strict=True)]
    return (total[0], total[1], total[2])


@register_ordering("drf")
class DominantResourceFairness:
    name = "drf"

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ctx = context or EMPTY_CONTEXT
        units = group_units(jobs)
        units.sort(key=unit_fifo_key)
        queues: dict[str, list[Unit]] = {}
        for unit in units:
            queues.setdefault(unit[0].tenant, []).append(unit)
        capacity = _capacity(ctx, units)
        consumed = {t: list(ctx.tenant_held.get(t, (0.0, 0.0, 0.0))) for t in queues}
        nxt = dict.fromkeys(queues, 0)
        heap = [(dominant_share(consumed[t], capacity), unit_fifo_key(q[0]), t) for t, q in queues.items()]
        heapq.heapify(heap)
        out: list[Unit] = []
        while heap:
            _, _, tenant = heapq.heappop(heap)
            queue = queues[tenant]
            unit = queue[nxt[tenant]]
            nxt[tenant] += 1
            out.append(unit)
            acc = consumed[tenant]
            for r, d in enumerate(unit_demand(unit)):
                acc[r] += d
            if nxt[tenant] < len(queue):
                heapq.heappush(heap, (dominant_share(acc, capacity), unit_fifo_key(queue[nxt[tenant]]), tenant))
        return flatten(out)
