"""Preemption for priority-queue orderings (Tiresias' 2D-LAS) in the simulator.

An ordering that exposes ``queue_of(unit, now, context) -> int`` (0 = served first) is
preemptive: after the normal step, a job still pending in queue ``q`` may evict running
jobs of strictly lower priority (queue ``> q``, service attained so far included) to
start. The node is the one where evicting lower-priority jobs makes room with the fewest
evictions (vectorised over nodes: capacity freed by all of a node's lower-priority jobs);
on it, victims go lowest priority first (highest queue, then the latest started) until
the job fits, and the policy then places the job (filters, score, GPU choice). A
preempted job returns to the queue with the service it attained and restarts from
scratch (no checkpointing: the pessimistic assumption). Gang members neither preempt
nor are preempted (all-or-nothing across nodes is left out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduling.assign import place_one
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.policies.base import Policy
from scheduling.snapshot import ClusterSnapshot
from scheduling.step_result import Placement

QueueOf = Callable[[tuple[JobRequest, ...], float, OrderContext], int]


@dataclass(frozen=True, slots=True)
class Victim:
    job: JobRequest
    node: int
    gpus: tuple[int, ...]
    queue: int
    start: float


def queue_function(policy: Policy) -> QueueOf | None:
    """The policy's ordering's ``queue_of`` when it has one (``las+…``), else ``None``."""
    ordering = getattr(policy, "ordering", None)
    return getattr(ordering, "queue_of", None) if ordering is not None else None


class VictimSet:
    """The running jobs that may be evicted in one step, as arrays for vectorised checks."""

    def __init__(self, snap: ClusterSnapshot, victims: Sequence[Victim]) -> None:
        self.snap = snap
        self.victims = [v for v in victims if not v.job.is_gang]
        self.alive = np.ones(len(self.victims), dtype=bool)
        self.queue = np.array([v.queue for v in self.victims], dtype=np.int64)
        self.node = np.array([v.node for v in self.victims], dtype=np.int64)
        self.cpu = np.array([v.job.cpu_milli for v in self.victims], dtype=np.int64)
        self.mem = np.array([v.job.memory_mib for v in self.victims], dtype=np.int64)
        slots = [(i, v.node, g, v.job.per_gpu_milli) for i, v in enumerate(self.victims) for g in v.gpus]
        self.slot_victim, self.slot_node, self.slot_gpu, self.slot_milli = (
            np.array([s[k] for s in slots], dtype=np.int64) for k in range(4))  # fmt: skip

    def best_node(self, job: JobRequest, queue: int) -> int | None:
        """The node where evicting all its lower-priority victims makes ``job`` fit, with
        the fewest of them; ``None`` when there is none."""
        snap = self.snap
        lower = self.alive & (self.queue > queue)
        if not lower.any():
            return None
        n = snap.num_nodes
        count = np.bincount(self.node[lower], minlength=n)
        cpu = snap.cpu_free + np.bincount(self.node[lower], weights=self.cpu[lower], minlength=n)
        mem = snap.mem_free + np.bincount(self.node[lower], weights=self.mem[lower], minlength=n)
        ok = (count > 0) & (cpu >= job.cpu_milli) & (mem >= job.memory_mib) & snap.healthy
        ok &= snap.cluster_mask(job.cluster)
        if job.num_gpu:
            if job.gpu_models:
                ok &= snap.model_mask(job.gpu_models)
            gpu = snap.gpu_free.astype(np.int64)
            take = lower[self.slot_victim] if len(self.slot_victim) else np.zeros(0, dtype=bool)
            np.add.at(gpu, (self.slot_node[take], self.slot_gpu[take]), self.slot_milli[take])
            ok &= np.count_nonzero(gpu >= job.per_gpu_milli, axis=1) >= job.num_gpu
        if not ok.any():
            return None
        return int(np.argmin(np.where(ok, count, np.iinfo(np.int64).max)))

    def evict(self, i: int) -> None:
        self.alive[i] = False


def preempt_for(snap: ClusterSnapshot, job: JobRequest, queue: int, victims: VictimSet,
                policy: Policy) -> tuple[Placement, list[Victim]] | None:  # fmt: skip
    """Place ``job`` (queue ``queue``) by evicting lower-priority victims on one node; on
    success ``snap`` holds the job and no longer the evicted victims, which are returned
    (and marked in ``victims``). On failure ``snap`` is unchanged."""
    if job.is_gang:
        return None
    node = victims.best_node(job, queue)
    if node is None:
        return None
    on_node = [i for i in np.flatnonzero(victims.alive & (victims.node == node) & (victims.queue > queue))]
    on_node.sort(key=lambda i: (-victims.victims[i].queue, -victims.victims[i].start, victims.victims[i].job.job_id))
    freed: list[int] = []
    outcome: Placement | None = None
    for i in on_node:
        v = victims.victims[i]
        snap.free(v.node, v.job, v.gpus)
        freed.append(int(i))
        got = place_one(snap, job, policy, top_k=0)
        if isinstance(got, Placement):
            outcome = got
            break
    if outcome is None or outcome.node_index != node:
        if outcome is not None:  # landed elsewhere: cannot happen when nothing else fit
            snap.free(outcome.node_index, job, outcome.gpu_indices)
        for i in freed:
            v = victims.victims[i]
            snap.reserve(v.node, v.job, v.gpus)
        return None
    for i in freed:
        victims.evict(i)
    return outcome, [victims.victims[i] for i in freed]
