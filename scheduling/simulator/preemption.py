"""Preemption for priority-queue orderings (Tiresias' 2D-LAS) in the simulator.

An ordering that exposes ``queue_of(unit, now, context) -> int`` (0 = served first) and the
same rule over arrays of single jobs, ``queues_of`` (:class:`PreemptiveOrdering`), is
preemptive: after the normal step, a job still pending in queue ``q`` may evict running
jobs of strictly lower priority (queue ``> q``, service attained so far included) to
start. The node is the one where evicting lower-priority jobs makes room with the fewest
evictions (vectorised over nodes: capacity freed by all of a node's lower-priority jobs);
on it, victims go lowest priority first (highest queue, then the latest started) until
the job fits, and the policy then places the job (filters, score, GPU choice). The victims
that still fit beside it then go back (the reprieve, most important first, as kube-scheduler's):
only those whose resources the job took are evicted. A
preempted job returns to the queue with the service it attained and restarts from
scratch (no checkpointing: the pessimistic assumption). Gang members neither preempt
nor are preempted (all-or-nothing across nodes is left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scheduling.assign import forget_placement, place_one
from scheduling.filters.framework import STATIC_FILTERS, run_filters
from scheduling.filters.max_instances import MaxInstancesFilter
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext, service_rate
from scheduling.orderings.base import Unit
from scheduling.policies.base import Policy
from scheduling.snapshot import CapacityError, ClusterSnapshot
from scheduling.step_result import Placement


class PreemptiveOrdering(Protocol):
    def queue_of(self, unit: Unit, now: float, context: OrderContext) -> int: ...

    def queues_of(self, attained: np.ndarray, rate: np.ndarray, waited: np.ndarray) -> np.ndarray: ...

    def next_change(self, attained: np.ndarray, rate: np.ndarray, waited: np.ndarray, running: np.ndarray) -> float: ...


@dataclass(frozen=True, slots=True)
class Victim:
    job: JobRequest
    node: int
    gpus: tuple[int, ...]
    queue: int
    start: float
    attained: float  # service attained by now, earlier runs included


def preemptive_ordering(policy: Policy) -> PreemptiveOrdering | None:
    """The policy's ordering when it ranks jobs into priority queues (``las+…``), else ``None``."""
    ordering = getattr(policy, "ordering", None)
    return ordering if hasattr(ordering, "queue_of") and hasattr(ordering, "queues_of") else None


class RunningTable:
    """The running jobs a preemptive ordering ranks at every step, kept as arrays: a job's row is
    written when it starts and freed when it stops, so a step ranks them all without a Python
    loop over thousands of jobs. What a row holds does not change while the job runs: its service
    attained in earlier runs and the time it was last queued (else its submit time) change only
    when it is preempted, and then it is no longer running."""

    def __init__(self) -> None:
        self._row: dict[str, int] = {}
        self._free: list[int] = []
        self._victims: list[Victim | None] = []
        self.alive = np.zeros(0, dtype=bool)
        self.rate = np.zeros(0)  # service_rate
        self.before = np.zeros(0)  # service attained in earlier runs
        self.start = np.zeros(0)
        self.since = np.zeros(0)  # last queued, else submitted

    def __len__(self) -> int:
        return len(self._row)

    def add(self, job: JobRequest, node: int, gpus: tuple[int, ...], start: float, attained: float, since: float) -> None:
        if job.is_gang:  # gang members are never preempted
            return
        if not self._free:
            old = len(self.alive)
            size = max(64, 2 * old)
            for name in ("alive", "rate", "before", "start", "since"):
                a = getattr(self, name)
                grown = np.zeros(size, dtype=a.dtype)
                grown[:old] = a
                setattr(self, name, grown)
            self._victims += [None] * (size - old)
            self._free = list(range(size - 1, old - 1, -1))
        i = self._free.pop()
        self._row[job.job_id] = i
        self._victims[i] = Victim(job, node, gpus, 0, start, attained)
        self.alive[i], self.rate[i], self.before[i], self.start[i], self.since[i] = (
            True, service_rate(job), attained, start, since)  # fmt: skip

    def remove(self, job_id: str) -> None:
        i = self._row.pop(job_id, None)
        if i is not None:
            self.alive[i] = False
            self._victims[i] = None
            self._free.append(i)

    def state(self, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(attained by now, service rate, waited since last queued)`` of the running jobs."""
        rows = np.flatnonzero(self.alive)
        return (self.before[rows] + self.rate[rows] * (now - self.start[rows]), self.rate[rows],
                now - self.since[rows])  # fmt: skip

    def victims(self, snap: ClusterSnapshot, now: float, ordering: PreemptiveOrdering, below: int) -> VictimSet:
        """The running jobs in a queue of lower priority than ``below`` (``queue > below``), ranked
        at ``now`` by :meth:`PreemptiveOrdering.queues_of` (each with its service attained by now)."""
        rows = np.flatnonzero(self.alive)
        attained, rate, waited = self.state(now)
        queue = ordering.queues_of(attained, rate, waited)
        out = []
        for k in np.flatnonzero(queue > below):
            v = self._victims[rows[k]]
            assert v is not None
            out.append(Victim(v.job, v.node, v.gpus, int(queue[k]), v.start, float(attained[k])))
        return VictimSet(snap, out)


class VictimSet:
    """The running jobs that may be evicted in one step, as arrays for vectorised checks."""

    def __init__(self, snap: ClusterSnapshot, victims: Sequence[Victim]) -> None:
        self.snap = snap
        self.victims = [v for v in victims if not v.job.is_gang]
        m = len(self.victims)
        self.alive = np.ones(m, dtype=bool)
        self.queue = np.fromiter((v.queue for v in self.victims), np.int64, m)
        self.node = np.fromiter((v.node for v in self.victims), np.int64, m)
        self.cpu = np.fromiter((v.job.cpu_milli for v in self.victims), np.int64, m)
        self.mem = np.fromiter((v.job.memory_mib for v in self.victims), np.int64, m)
        self.app = np.array([v.job.app or "" for v in self.victims], dtype=object)
        slots = [(i, v.node, g, v.job.per_gpu_milli) for i, v in enumerate(self.victims) for g in v.gpus]
        self.slot_victim, self.slot_node, self.slot_gpu, self.slot_milli = (
            np.array([s[k] for s in slots], dtype=np.int64) for k in range(4))  # fmt: skip

    def __len__(self) -> int:
        return len(self.victims)

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
        ok = (count > 0) & (cpu >= job.cpu_milli) & (mem >= job.memory_mib)
        ok &= run_filters(job, snap, STATIC_FILTERS, explain=False).feasible_mask  # (found by review: a node of
        # another pool was chosen, failed the job's filters, and the eviction was rolled back)
        if job.app and not (now := MaxInstancesFilter().mask(job, snap)).all():  # its app's limit, once the
            same = lower & (self.app == job.app)  # victims of its app are gone (found by review: a node whose
            left = snap.instances(job.app) - np.bincount(self.node[same], minlength=n)  # instance stays was chosen)
            fits = np.ones(n, dtype=bool) if job.max_instances_per_node is None else left < job.max_instances_per_node
            held = snap.instance_cap(job.app)  # (the tightest limit among all its instances, victims' included:
            ok &= (fits if held is None else fits & (left < held)) | now  # a node may be passed over, not taken wrongly)
        if job.num_gpu:
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
                policy: Policy, *, try_free: bool = True) -> tuple[Placement, list[Victim]] | None:  # fmt: skip
    """Place ``job`` (queue ``queue``) by evicting lower-priority victims on one node; on
    success ``snap`` holds the job and no longer the evicted victims, which are returned
    (and marked in ``victims``). On failure ``snap`` is unchanged. A job that fits without
    evicting anyone (an earlier eviction of the step left room) is placed so, evicting none
    (found by review: it evicted another victim, which lost its work for nothing); ``try_free``:
    whether to try that (the caller knows no eviction happened yet, so the step's own attempt stands)."""
    if job.is_gang:
        return None
    if try_free and isinstance(got := place_one(snap, job, policy, top_k=0), Placement):
        return got, []
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
            forget_placement(policy, snap, outcome.node_index, job)
        for i in freed:
            v = victims.victims[i]
            snap.reserve(v.node, v.job, v.gpus)
        return None
    # the reprieve, as kube-scheduler's: the victims freed, the most important first, go back where they still
    # fit beside the job (found by review: a CPU-only victim freed before the GPU one the job needed lost its
    # run for nothing). One its app's per-node limits would refuse now stays out (the max-instances filter's).
    for i in reversed(freed):
        v = victims.victims[i]
        if v.job.app and not MaxInstancesFilter().mask(v.job, snap)[v.node]:  # its app's limits, the job's and
            continue  # every instance's on the node (found by review: one of another's limit 2 made a third)
        try:
            snap.reserve(v.node, v.job, v.gpus)
        except CapacityError:
            continue
        freed.remove(i)
    for i in freed:
        victims.evict(i)
    return outcome, [victims.victims[i] for i in freed]
