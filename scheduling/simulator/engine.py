"""The discrete-event engine.

Events on a virtual clock: arrivals (the workload's submit times, scaled by the load
factor), departures (a job placed at ``t`` on node ``n`` leaves at ``t + duration /
speed[n]``) and scheduling steps. A step runs at the first point of the ``step_s`` grid at
or after an arrival or a departure — the same trigger as the worker's loop — and calls
:func:`scheduling.assign.schedule_step` with the policy, exactly as the worker does. At
equal times departures come first, then arrivals, then the step. Without an event nothing
can change, so there is no step (the queue may wait for the next departure) — except under a
preemptive ordering (``las+…``), whose ranks change with time alone (a running job's service
crossing a threshold, a waiting job reaching its starvation promotion): while jobs wait, a step
also runs at the first grid point at or after the next such change, as the worker, stepping on
its clock, would see it (found by review: a promotion due at 33,300 s took effect at 33,500 s,
the next arrival). ``step`` replaces ``schedule_step`` with a function of its signature (a
benchmark runs the worker's own path: order once, the model-backed placement's
``prepare_step``, then the step).

A job enters the queue once all its DAG parents finished; a job whose parent was
rejected is rejected. A job no node of the empty cluster can hold is rejected with the
filters' reason (``permanent``), like the worker does. Deterministic: the only
randomness is the seeded node speeds (and a seeded policy's own).
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduling.assign import StepResult, schedule_step
from scheduling.filters.framework import filter_shape
from scheduling.job import JobRequest
from scheduling.metrics import Holding, JobOutcome
from scheduling.metrics.fragmentation import Workload as TargetWorkload
from scheduling.metrics.fragmentation import fragmentation_rate, partial_gpu_ratio
from scheduling.node import NodeView
from scheduling.order_context import LearningDurationPredictor, OrderContext, service_rate
from scheduling.parent_cycles import waiting_on_a_cycle
from scheduling.policies.base import Policy
from scheduling.simulator.config import SimConfig
from scheduling.simulator.preemption import PreemptiveOrdering, RunningTable, preempt_for, preemptive_ordering
from scheduling.simulator.result import SimResult, StepRecord
from scheduling.simulator.speeds import node_speeds
from scheduling.simulator.workload import SimJob
from scheduling.snapshot import ClusterSnapshot

Progress = Callable[[int, int], None]  # (jobs done, jobs total)


@dataclass
class _Running:
    job: SimJob
    node: int
    gpus: tuple[int, ...]
    start: float
    seq: int  # its departure event (a preempted job's stale departure is skipped)
    holding: int  # index into holdings, -1 without GPUs
    since: float  # when it was last queued (kept for a run its own step takes back)


class Simulator:
    def __init__(self, nodes: Sequence[NodeView], jobs: Sequence[SimJob], policy: Policy,
                 config: SimConfig | None = None, *, estimator: LearningDurationPredictor | None = None,
                 step: Callable[..., StepResult] = schedule_step) -> None:  # fmt: skip
        self.config = config or SimConfig()
        self.step = step
        self.policy = policy
        self.estimator = estimator
        self.snapshot = ClusterSnapshot.from_nodes(nodes)
        self.speeds = node_speeds(len(nodes), self.config.speed_spread, self.config.seed)
        self.jobs = sorted(jobs, key=lambda j: (j.request.submit_time, j.job_id))
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique in a simulation")
        snap = self.snapshot
        self.capacity = (float(snap.cpu_cap.sum()), float(snap.mem_cap.sum()), float(snap.gpu_cap_milli.sum()))

    def run(self, progress: Progress | None = None) -> SimResult:
        cfg, snap = self.config, self.snapshot
        started_wall = time.perf_counter()
        by_id = {j.job_id: j for j in self.jobs}
        children: dict[str, list[str]] = {}
        waiting_on: dict[str, int] = {}
        for j in self.jobs:
            known = [p for p in j.parents if p in by_id]
            waiting_on[j.job_id] = len(known)
            for p in known:
                children.setdefault(p, []).append(j.job_id)

        pending: dict[str, JobRequest] = {}  # eligible, in the queue
        running: dict[str, _Running] = {}
        departures: list[tuple[float, int, str]] = []
        tenant_held: dict[str, list[float]] = {}
        outcome: dict[str, dict] = {j.job_id: {"state": "pending"} for j in self.jobs}
        holdings: list[Holding] = []
        fragmentation: list[tuple[float, float, float]] = []
        gpu_jobs = [j.request for j in self.jobs if j.request.num_gpu]
        target = TargetWorkload.from_jobs(gpu_jobs) if gpu_jobs and cfg.fragmentation_every else None
        steps: list[StepRecord] = []
        orders: list[list[str]] = []
        rejected_reasons: dict[str, int] = {}
        attained: dict[str, float] = {}  # service received in preempted runs
        queued_since: dict[str, float] = {}
        ordering = preemptive_ordering(self.policy)
        table = RunningTable()  # what preemption ranks (kept only for a preemptive ordering)
        reversals = 0
        seq = 0
        next_arrival = 0
        next_step: float | None = None
        done = events = 0
        now = self.jobs[0].request.submit_time if self.jobs else 0.0

        def due(t: float) -> None:
            nonlocal next_step
            # the grid point at or after t; never before it (the 1e-9 that absorbs float noise could put a
            # step a hair before the arrival that called for it, and the clock ran backwards: found by review)
            grid = max(float(np.ceil(t / cfg.step_s - 1e-9) * cfg.step_s) + 0.0, t)  # (+ 0.0: no -0.0)
            # (a step still to come stays due: only one already past, never run, is replaced; found by review:
            # a later rank change's step replaced the one an eviction had asked for)
            next_step = grid if next_step is None or next_step < now else min(next_step, grid)

        def reject(job_id: str, reason: str) -> None:
            nonlocal done
            outcome[job_id].update(state="rejected", reason=reason)
            rejected_reasons[reason] = rejected_reasons.get(reason, 0) + 1
            done += 1
            for c in children.get(job_id, []):
                if outcome[c]["state"] == "pending":
                    reject(c, f"DAG parent {job_id} was rejected")

        stuck = waiting_on_a_cycle({j.job_id: [p for p in j.parents if p in by_id] for j in self.jobs if j.parents})
        for job_id in (j.job_id for j in self.jobs if j.job_id in stuck):  # never eligible: rejected with the
            if outcome[job_id]["state"] == "pending":  # reason (found by review: they stayed pending for ever)
                reject(job_id, "DAG parents form a cycle")

        def hold(tenant: str, job: JobRequest, sign: int) -> None:
            held = tenant_held.setdefault(tenant, [0.0, 0.0, 0.0])
            held[0] += sign * job.cpu_milli
            held[1] += sign * job.memory_mib
            held[2] += sign * job.gpu_demand_milli

        def start(job_id: str, node: int, gpus: tuple[int, ...]) -> None:
            """Book keeping of a placement already reserved on ``snap``."""
            nonlocal seq
            job = by_id[job_id]
            del pending[job_id]
            since = queued_since.pop(job_id, job.request.submit_time)  # last queued (a restart), else submitted
            hold(job.request.tenant, job.request, +1)
            end = now + job.duration_s / float(self.speeds[node])
            seq += 1
            heapq.heappush(departures, (end, seq, job_id))
            holding = -1
            if job.request.gpu_demand_milli:
                holding = len(holdings)
                holdings.append(Holding(now, end, job.request.gpu_demand_milli))
            running[job_id] = _Running(job, node, gpus, now, seq, holding, since)
            if ordering is not None:
                table.add(job.request, node, gpus, now, attained.get(job_id, 0.0), since)
            o = outcome[job_id]
            o.update(state="running", start=o.get("start", now), placements=o.get("placements", 0) + 1)

        def preempt(order: list[str], context: OrderContext) -> tuple[int, bool]:
            """Let blocked higher-priority jobs evict lower-priority running ones: the evictions, and
            whether any room was made. A job placed at this same moment (by this step) is taken back, not
            evicted: it never ran, so no placement, no reversal and no new wait are counted (found by review: a blocked
            queue-0 job's preemption took the node a lower-priority job had just been given, and the
            0 s run counted as a placement and a reversal and restarted that job's wait)."""
            assert ordering is not None
            blocked = [j for j in order if j in pending and not pending[j].is_gang][: cfg.preemption_checks]
            if not blocked or not running:
                return 0, False
            queues = {j: ordering.queue_of((pending[j],), now, context) for j in blocked}
            victims = table.victims(snap, now, ordering, below=min(queues.values()))
            if not len(victims):
                return 0, False
            evictions, freed = 0, False
            hopeless: set[tuple] = set()  # (shape, queue) that found no node this step
            for job_id in blocked:
                req = pending[job_id]
                queue = queues[job_id]
                key = (*filter_shape(req), queue)  # everything the filters read (found by review: an app's
                # per-node limit failing one job made every job of its resources skip preemption)
                if key in hopeless:
                    continue
                got = preempt_for(snap, req, queue, victims, self.policy, try_free=freed)
                if got is None:
                    hopeless.add(key)
                    continue
                placement, evicted = got
                for v in evicted:
                    r = running.pop(v.job.job_id)
                    table.remove(v.job.job_id)
                    attained[v.job.job_id] = v.attained
                    hold(v.job.tenant, v.job, -1)
                    if r.holding >= 0:
                        h = holdings[r.holding]
                        holdings[r.holding] = Holding(h.start, now, h.gpu_milli)
                    pending[v.job.job_id] = v.job
                    o = outcome[v.job.job_id]
                    o["state"], freed = "pending", True
                    if r.start == now:  # placed at this moment: taken back
                        queued_since[v.job.job_id] = r.since
                        o["placements"] -= 1
                        if not o["placements"]:
                            del o["placements"], o["start"]
                    else:
                        queued_since[v.job.job_id] = now
                        evictions += 1
                start(job_id, placement.node_index, placement.gpu_indices)
            return evictions, freed

        while True:
            t_dep = departures[0][0] if departures else np.inf
            t_arr = self.jobs[next_arrival].request.submit_time if next_arrival < len(self.jobs) else np.inf
            t_step = next_step if next_step is not None and pending else np.inf
            t = min(t_dep, t_arr, t_step)
            if t == np.inf:
                break
            now = t
            if t_dep == now:
                _, dep_seq, job_id = heapq.heappop(departures)
                if job_id not in running or running[job_id].seq != dep_seq:
                    continue  # the departure of a run that was preempted
                r = running.pop(job_id)
                table.remove(job_id)
                snap.free(r.node, r.job.request, r.gpus)
                hold(r.job.request.tenant, r.job.request, -1)
                outcome[job_id].update(state="finished", finish=now)
                done += 1
                if self.estimator is not None:
                    self.estimator.observe(r.job.request, now - r.start)  # the measured run time
                for c in children.get(job_id, []):
                    waiting_on[c] -= 1
                    if waiting_on[c] == 0 and outcome[c]["state"] == "pending" and outcome[c].get("arrived"):
                        pending[c] = by_id[c].request
                due(now)
            elif t_arr == now:
                job = self.jobs[next_arrival]
                next_arrival += 1
                outcome[job.job_id]["arrived"] = True
                if waiting_on[job.job_id] == 0 and outcome[job.job_id]["state"] == "pending":
                    pending[job.job_id] = job.request
                due(now)
            else:
                next_step = None
                context = OrderContext(
                    tenant_held={k: (v[0], v[1], v[2]) for k, v in tenant_held.items()},
                    capacity=self.capacity, estimator=self.estimator, attained_service=attained,
                    queued_since=queued_since,
                )  # fmt: skip
                result = self.step(snap, list(pending.values()), self.policy, now=now, top_k=0,
                                   context=context)  # fmt: skip
                if cfg.record_orders:
                    orders.append(result.order[: cfg.order_head])
                steps.append(StepRecord(now, len(pending), len(result.placements), result.compute_ms))
                for p in result.placements:
                    snap.reserve(p.node_index, by_id[p.job_id].request, p.gpu_indices)
                    start(p.job_id, p.node_index, p.gpu_indices)
                for u in result.unschedulable:
                    if u.permanent:
                        del pending[u.job_id]
                        reject(u.job_id, u.reason)
                if ordering is not None:  # preemption is part of the step's compute time
                    t0 = time.perf_counter()
                    evicted, freed = preempt(result.order, context)
                    reversals += evicted
                    if freed:  # the evicted and the jobs left out may fit what is left: the next step
                        due(now + cfg.step_s)  # (found by review: they waited for the next arrival or departure)
                    steps[-1] = dataclasses.replace(steps[-1], compute_ms=steps[-1].compute_ms
                                                    + (time.perf_counter() - t0) * 1000)  # fmt: skip
                steps[-1] = dataclasses.replace(steps[-1], left=len(pending))
                if ordering is not None and pending:  # ranks that change with time alone (module docstring)
                    change = rank_change(ordering, now, pending, table, attained, queued_since)
                    if change < np.inf:  # at the next step at the earliest, as the worker's clock would
                        due(now + max(change, cfg.step_s))
                if target is not None and len(steps) % cfg.fragmentation_every == 1 % cfg.fragmentation_every:
                    fragmentation.append((now, fragmentation_rate(snap, target), partial_gpu_ratio(snap)))
            events += 1
            if progress is not None and events % 500 == 0:
                progress(done, len(self.jobs))
        if progress is not None:
            progress(done, len(self.jobs))

        outcomes = [
            JobOutcome(job_id=j.job_id, submit=j.request.submit_time, state=outcome[j.job_id]["state"],
                       start=outcome[j.job_id].get("start"), finish=outcome[j.job_id].get("finish"),
                       placements=outcome[j.job_id].get("placements", 0), gpu_milli=j.request.gpu_demand_milli,
                       tenant=j.request.tenant)  # fmt: skip
            for j in self.jobs
        ]
        return SimResult(
            policy=self.policy.name, config=cfg, outcomes=outcomes, steps=steps, holdings=holdings,
            gpu_capacity_milli=int(self.capacity[2]), rejected_reasons=rejected_reasons, orders=orders,
            fragmentation=fragmentation, reversals=reversals,
            wall_s=time.perf_counter() - started_wall, end_time=now,
        )  # fmt: skip


def rank_change(ordering: PreemptiveOrdering, now: float, pending: dict[str, JobRequest], table: RunningTable,
                attained: dict[str, float], queued_since: dict[str, float]) -> float:  # fmt: skip
    """Seconds from ``now`` until a waiting or running job's queue changes with time alone (``inf``: never)."""
    waiting = [j for j in pending.values() if attained.get(j.job_id, 0.0) > 0]  # the others have run nothing
    run_attained, run_rate, run_waited = table.state(now)
    attained_all = np.concatenate([[attained[j.job_id] for j in waiting], run_attained])
    rate = np.concatenate([[service_rate(j) for j in waiting], run_rate])
    waited = np.concatenate([[now - queued_since.get(j.job_id, j.submit_time) for j in waiting], run_waited])
    running = np.concatenate([np.zeros(len(waiting), bool), np.ones(len(run_attained), bool)])
    return ordering.next_change(attained_all, rate, waited, running)


def simulate(nodes: Sequence[NodeView], jobs: Sequence[SimJob], policy: Policy, config: SimConfig | None = None,
             *, estimator: LearningDurationPredictor | None = None, progress: Progress | None = None,
             step: Callable[..., StepResult] = schedule_step) -> SimResult:  # fmt: skip
    """Run one simulation (see :class:`Simulator`)."""
    return Simulator(nodes, jobs, policy, config, estimator=estimator, step=step).run(progress)
