"""How little queueing a trace allows: a floor that no placement can beat.

An app whose jobs carry ``max_instances_per_node`` can run at most that many of its tasks on a
node. When it submits more tasks than the cluster has such slots, its tasks queue whatever the
placement does. :func:`instance_limit_bounds` computes, per limited app, the least total
queueing its tasks can have when they start in queue order (submit time, then job id: the
``fifo`` order every plain placement uses): greedy list scheduling on the app's slots.

Why it is a floor: with the start order fixed, the k-th task cannot start before the k-th
earliest moment a slot is free, and the greedy schedule starts every task at exactly that
moment. The slots are counted generously (the limit on every node where the app's shape fits
the empty cluster, however little room the node would have left), and the other apps' jobs are
ignored, so every real run queues at least this much. It holds for equal node speeds only (a
task's run time is its trace duration), and not for orderings that start an app's tasks out of
queue order (``sjf-oracle``, ``sjf-predicted``, preemptive ``las``).

Only apps whose tasks all have one shape (the same filter inputs), none of them in a gang or
waiting for DAG parents, get a bound: a plain placement tries the pending tasks in queue order at
every step, so a later task of the app starts only where an earlier one could have. With two
shapes a small later task can start where an earlier big one does not fit (by CPU, say) and
the queue order no longer holds (found by review: one node, limit 2, two 6-CPU tasks and five
4-CPU ones: "floor" 486 s, every placement 99 s). A shape no node takes is rejected, not
queued: such an app has no bound either.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.filters.framework import filter_shape, run_filters
from scheduling.node import NodeView
from scheduling.simulator.workload import SimJob
from scheduling.snapshot import ClusterSnapshot


@dataclass(frozen=True)
class InstanceLimitBound:
    app: str
    tasks: int
    slots: int  # limit × nodes where the app's shape fits the empty cluster
    wait_s: float  # least total queueing of the app's tasks, started in queue order
    job_ids: frozenset[str]

    @property
    def mean_wait_s(self) -> float:
        return self.wait_s / self.tasks if self.tasks else 0.0


def instance_limit_bounds(nodes: Sequence[NodeView], jobs: Sequence[SimJob]) -> list[InstanceLimitBound]:
    """One bound per app whose jobs set ``max_instances_per_node``, largest floor first."""
    limited: dict[str, list[SimJob]] = defaultdict(list)
    for job in jobs:
        if job.request.app and job.request.max_instances_per_node is not None:
            limited[job.request.app].append(job)
    if not limited or not nodes:
        return []
    empty = ClusterSnapshot.from_nodes(nodes).empty()
    feasible: dict[tuple, int] = {}
    bounds = []
    for app, tasks in limited.items():
        shapes = {filter_shape(job.request) for job in tasks}
        if len(shapes) > 1 or any(job.request.is_gang or job.parents for job in tasks):
            continue  # its tasks may start out of queue order: no floor (module docstring)
        (key,) = shapes
        if key not in feasible:
            feasible[key] = run_filters(tasks[0].request, empty).feasible_count
        if not feasible[key]:
            continue  # rejected, not queued
        slots = max(job.request.max_instances_per_node or 0 for job in tasks) * feasible[key]
        bounds.append(InstanceLimitBound(app, len(tasks), slots, _fifo_wait(tasks, slots),
                                         frozenset(job.job_id for job in tasks)))  # fmt: skip
    return sorted(bounds, key=lambda b: (-b.wait_s, b.app))


def _fifo_wait(tasks: Sequence[SimJob], slots: int) -> float:
    """Total queueing of ``tasks`` started in (submit time, job id) order, each on the slot
    free soonest. No slot at all: the tasks never start (``inf``)."""
    if slots <= 0:
        return float("inf")
    free = [0.0] * min(slots, len(tasks))
    total = 0.0
    for job in sorted(tasks, key=lambda j: (j.request.submit_time, j.job_id)):
        submit = job.request.submit_time
        start = max(free[0], submit)
        total += start - submit
        heapq.heapreplace(free, start + job.duration_s)
    return total
