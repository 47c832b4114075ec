"""The scheduling loop: every ``step`` seconds (and soon after an arrival or freed
resources), snapshot the tables, run the policy, publish the decisions to ``decisions``,
apply them to the tables once the broker has acknowledged them, then publish the commands
to ``actions`` for the cluster agents.

Order matters. A decision is durable before its job changes state, and before its
command exists: a worker that dies in between finds the decision on the ``decisions``
topic when it restarts (it replays that topic before it schedules again, see
``catchup.py``) and the job reserved; if no agent ever confirms, the confirmation
timeout re-queues it. Decision ids are deterministic per (job, attempt), so a decision
repeated after a restart is the same decision to the agents and the archive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from scheduling.assign import schedule_step
from scheduling.duration_estimate import estimator_for
from scheduling.events import (
    Candidate,
    DecisionRecord,
    JobLifecycle,
    PlacementCommand,
    decision_id_for,
    new_event_id,
    partition_for,
)
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.order_context import OrderContext, cluster_capacity, tenant_usage
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot
from streams import telemetry
from streams.catchup import CatchUp
from streams.state import PendingJob, RunningJob
from streams.table_views import TableViews

if TYPE_CHECKING:
    from streams.app import Worker

log = logging.getLogger("semsched.loop")

#: a job that fits no node of a cluster is rejected only once the cluster's node list has
#: not changed for this long (nodes arrive one telemetry event at a time)
INVENTORY_SETTLE_S = 10.0


class SchedulingLoop:
    def __init__(self, w: Worker) -> None:
        self.w = w
        import inference  # noqa: F401  (registers "learned"; torch loads only with a model)

        self.policy = get_policy(w.settings.policy)
        w.durations = estimator_for(self.policy)  # sjf-learned: finishing jobs teach its own predictor
        self.catchup = CatchUp(w.settings, w.settings.topic("decisions"), group_id=w.app.conf.id)
        self.owned: set[int] = set()
        self._gangs_scanned = False
        self._inventory_size: dict[str, int] = {}
        self._inventory_since: dict[str, float] = {}
        self.timed_out: set[str] = set()  # decision ids whose timeout we already announced
        self.last_reason: dict[str, str] = {}
        self.views = TableViews(w)
        self.steps = 0
        self.step_id = ""  # the step being decided (on its decision records)
        self.stats: dict[str, float] = {"tick_s": 0.0, "pending_seen": 0, "holdings_seen": 0, "placed": 0,
                                        "compute_s": 0.0, "publish_s": 0.0}  # fmt: skip
        self.woken = asyncio.Event()
        self.step_trace: telemetry.StepTrace | None = None  # spans of the cluster step under way

    def wake(self) -> None:
        """Something changed (arrival, freed resources): step soon instead of on the clock."""
        if self.w.settings.event_debounce_s >= 0:
            self.woken.set()

    # -- one step ---------------------------------------------------------------------------
    async def tick(self) -> None:
        app = self.w.app
        recovering = bool(app.in_recovery) or not app.tables.recovery.completed.is_set()
        assigned = {tp.partition for tp in app.consumer.assignment() if tp.topic == self.catchup.topic}
        if not await self.catchup.ready(self.w.applied_offsets, recovering=recovering, assigned=assigned):
            return
        # only the clusters whose partitions this worker owns: the tables may also hold
        # standby replicas and keys of partitions that moved to another worker
        self.owned = assigned
        if not self._gangs_scanned:  # once the recovered done table is there
            self.w.rejected_gangs |= {d["gang_id"] for d in list(self.w.done.values())
                                      if d and d["status"] == "rejected" and d.get("gang_id")}  # fmt: skip
            self._gangs_scanned = True
        await self._check_timeouts()
        pending = self.views.pending(self.owned)
        telemetry.observe_queue(pending)
        if not pending:
            return
        t0 = time.perf_counter()
        nodes = self.views.nodes(self.owned)
        holdings = self.views.holdings(self.owned)
        for cluster, jobs in pending.items():
            views = nodes.get(cluster)
            self._track_inventory(cluster, len(views or ()))
            if not views:  # jobs wait, and say why
                part = partition_for(cluster, self.w.settings.partitions)
                for p, _ in jobs:
                    if fut := await self._note_waiting(p, f"no nodes known in cluster {cluster!r} yet", part, 0.0):
                        await fut
                continue
            with telemetry.step_trace(cluster, self.policy.name, self.w.traces, len(jobs)) as self.step_trace:
                await self._step_cluster(cluster, views, jobs, holdings)
        self.steps += 1
        self.stats["tick_s"] += time.perf_counter() - t0
        self.stats["pending_seen"] += sum(len(j) for j in pending.values())
        self.stats["holdings_seen"] += len(holdings)
        # forget cache entries of jobs that left the queue
        queued = self.views.forget_left_jobs()
        for job_id in [j for j in self.last_reason if j not in queued]:
            del self.last_reason[job_id]
        reserved = {d["decision_id"] for d in list(self.w.running.values()) if d is not None}
        self.timed_out &= reserved

    async def _step_cluster(self, cluster: str, views: list[NodeView], jobs: list[tuple[PendingJob, JobRequest]],
                            holdings: list[tuple[str, JobRequest, list[int]]]) -> None:  # fmt: skip
        tick_ts = time.time()
        self.step_id = f"{cluster}:{self.steps}:{tick_ts:.3f}"  # on every decision of this step
        snap = ClusterSnapshot.from_nodes(views)
        index = {v.node_id: i for i, v in enumerate(views)}
        for node_id, req, gpus in holdings:
            if req.cluster == cluster and node_id in index:
                try:
                    snap.reserve(index[node_id], req, gpus, check=False)
                except ValueError as e:  # e.g. GPU indices that node no longer has
                    log.warning("cannot account %s on %s: %s", req.job_id, node_id, e)
        part = partition_for(cluster, self.w.settings.partitions)
        st = self.step_trace  # opened by tick() around this call
        assert st is not None
        jobs, held_back = self._dag_gate(jobs)
        for p, reason, permanent in held_back:
            if permanent:
                await self._reject(p, reason, part, 0.0, st)
            elif fut := await self._note_waiting(p, reason, part, 0.0):
                await fut
        by_id = {p.job.job_id: (p, r) for p, r in jobs}
        context = OrderContext(
            tenant_held=tenant_usage(req for _, req, _ in holdings if req.cluster == cluster),
            capacity=cluster_capacity(snap),
            queued_since={p.job.job_id: p.queued_ts for p, _ in jobs if p.attempt > 0},
            estimator=self.w.durations,
        )  # orderings (drf, las, priority, sjf) read it; placements ignore it
        requests = [r for _, r in jobs]
        prepare = getattr(self.policy, "prepare_step", None)  # a model-backed placement: one call per step
        model_s = time.perf_counter()
        if prepare is not None and requests:
            await prepare(snap, requests, tick_ts)  # async: a model server's deadline does not block the loop
        model_s = time.perf_counter() - model_s
        result = schedule_step(snap, requests, self.policy, now=tick_ts, context=context)
        result.compute_ms += model_s * 1000.0  # the step's compute includes its model call
        model = getattr(self.policy, "last_step", None)  # which model version decided, or why not
        by_fallback: set[str] = getattr(self.policy, "fallback_jobs", set())  # jobs the heuristic scored
        version = (model.version or "") if model else ""
        why = f"; {model.backend} fell back to {self.policy.fallback_name}: {model.reason}" if model else ""
        cost_of = getattr(self.policy, "predicted_cost", None)  # the learned cost estimator ψ, if any
        durations = self._predicted_durations([by_id[pl.job_id][1] for pl in result.placements])
        self.stats["compute_s"] += result.compute_ms / 1000
        self.stats["placed"] += len(result.placements)
        decisions: list[Awaitable[Any]] = []
        decided: list[DecisionRecord] = []
        actions: list[tuple[str, bytes, list[tuple[str, bytes]]]] = []
        for pl in result.placements:
            p, req = by_id[pl.job_id]
            now = time.time()
            since = p.submit_ts if p.attempt == 0 else p.queued_ts
            did = decision_id_for(p.job.job_id, p.attempt)
            rec = DecisionRecord(
                event_id=did, decision_id=did, job_id=p.job.job_id, cluster=cluster, attempt=p.attempt,
                outcome="placed", node_id=pl.node_id, gpu_indices=list(pl.gpu_indices), policy=self.policy.name,
                candidates=[Candidate(node_id=n, score=float(s)) for n, s in pl.candidates],
                feasible_nodes=pl.feasible_nodes, latency_ms=max(0.0, (now - since) * 1000),
                step_compute_ms=result.compute_ms, submit_time=p.job.event_time,
                reason=pl.reason + (why if pl.job_id in by_fallback else ""),
                cpu_milli=p.job.cpu_milli, memory_mib=p.job.memory_mib, gpu_milli_per_gpu=p.job.per_gpu_milli,
                trace_duration_s=p.job.trace_duration_s, step_id=self.step_id, model_version=version,
                fallback=pl.job_id in by_fallback, predicted_duration_s=durations.get(pl.job_id),
                predicted_cost=cost_of(pl.job_id, pl.node_index) if cost_of else None,
            )  # fmt: skip
            cmd = PlacementCommand(
                decision_id=did, job_id=p.job.job_id, cluster=cluster, attempt=p.attempt, node_id=pl.node_id,
                gpu_indices=list(pl.gpu_indices), cpu_milli=p.job.cpu_milli, memory_mib=p.job.memory_mib,
                gpu_milli_per_gpu=p.job.per_gpu_milli, policy=self.policy.name, reason=pl.reason,
                trace_duration_s=p.job.trace_duration_s,
            )  # fmt: skip
            self.w.inflight[p.job.job_id] = (rec, req)
            decided.append(rec)
            self.last_reason.pop(p.job.job_id, None)
            hs = st.decide(rec.job_id, did, outcome="placed", latency_ms=rec.latency_ms, node_id=pl.node_id)
            decisions.append(await self._send("decisions", rec.job_id, rec.to_bytes(), part, hs))
            actions.append((cmd.node_id, cmd.to_bytes(), hs))
        settled = time.time() - self._inventory_since.get(cluster, 0.0) >= INVENTORY_SETTLE_S
        for un in result.unschedulable:
            p, _ = by_id[un.job_id]
            if un.permanent and settled:
                rec = self._rejection(p, f"can never run in cluster {cluster!r}: {un.reason}", result.compute_ms)
                self.w.inflight[p.job.job_id] = (rec, None)
                decided.append(rec)
                hs = st.decide(rec.job_id, rec.decision_id, outcome="rejected", latency_ms=rec.latency_ms)
                decisions.append(await self._send("decisions", rec.job_id, rec.to_bytes(), part, hs))
            elif fut := await self._note_waiting(p, un.reason, part, result.compute_ms):
                decisions.append(fut)  # may fit later (resources free up, more nodes arrive)
        # every decision is acknowledged by the broker before its job changes state and before
        # any command goes out; the decisions topic stays the log a restarted worker replays
        t_pub = time.perf_counter()
        try:
            await asyncio.gather(*decisions)
            st.acknowledged()
            for rec in decided:
                await self.w.apply_decision(rec, part, in_stream=False)
        finally:
            # a failed publish must not leave jobs invisible to the next step (an acked but
            # unapplied decision is applied when it comes back, or re-decided under its id)
            for rec in decided:
                held = self.w.inflight.get(rec.job_id)
                if held is not None and held[0].decision_id == rec.decision_id:
                    del self.w.inflight[rec.job_id]
        await asyncio.gather(*[await self._send("actions", key, value, part, hs) for key, value, hs in actions])
        self.stats["publish_s"] += time.perf_counter() - t_pub

    def _predicted_durations(self, jobs: list[JobRequest]) -> dict[str, float]:
        """The duration predictor's estimates for the decision records (one batch when it has one)."""
        many = getattr(self.w.durations, "predict_many", None)
        values = list(many(jobs)) if many is not None and jobs else [self.w.durations.predict(j) for j in jobs]
        return {j.job_id: float(v) for j, v in zip(jobs, values, strict=True) if v is not None and math.isfinite(v)}

    def _track_inventory(self, cluster: str, nodes: int) -> None:
        if self._inventory_size.get(cluster) != nodes:
            self._inventory_size[cluster] = nodes
            self._inventory_since[cluster] = time.time()

    def _dag_gate(self, jobs: list[tuple[PendingJob, JobRequest]]
                  ) -> tuple[list[tuple[PendingJob, JobRequest]], list[tuple[PendingJob, str, bool]]]:  # fmt: skip
        """Jobs whose DAG parents have all finished go on; the others wait (a parent still to
        come or to finish) or are rejected (a parent was rejected, so it never will; or a
        member of their gang was, so the gang can never run whole)."""
        ready, held = [], []
        for p, req in jobs:
            if p.job.gang_id and p.job.gang_id in self.w.rejected_gangs:
                held.append((p, f"gang {p.job.gang_id}: another member was rejected", True))
                continue
            parents = p.job.dag_parents
            if not parents:
                ready.append((p, req))
                continue
            status = {q: (self.w.done.get(q) or {}).get("status") for q in parents}
            failed = sorted(q for q, st in status.items() if st == "rejected")
            waiting = sorted(q for q, st in status.items() if st != "finished")
            if failed:
                held.append((p, f"DAG parent(s) {', '.join(failed)} were rejected", True))
            elif waiting:
                held.append((p, f"waiting for DAG parent(s) {', '.join(waiting)} to finish", False))
            else:
                ready.append((p, req))
        return ready, held

    def _rejection(self, p: PendingJob, reason: str, compute_ms: float) -> DecisionRecord:
        did = decision_id_for(p.job.job_id, p.attempt)
        return DecisionRecord(
            event_id=did, decision_id=did, job_id=p.job.job_id, cluster=p.job.cluster, attempt=p.attempt,
            outcome="rejected", policy=self.policy.name, latency_ms=max(0.0, (time.time() - p.submit_ts) * 1000),
            step_compute_ms=compute_ms, submit_time=p.job.event_time, reason=reason, step_id=self.step_id,
        )  # fmt: skip

    async def _reject(self, p: PendingJob, reason: str, part: int, compute_ms: float,
                      st: telemetry.StepTrace) -> None:  # fmt: skip
        """Give up on a job now (publish, then apply once acknowledged)."""
        rec = self._rejection(p, reason, compute_ms)
        self.w.inflight[p.job.job_id] = (rec, None)
        hs = st.decide(rec.job_id, rec.decision_id, outcome="rejected", latency_ms=rec.latency_ms)
        try:
            await (await self._send("decisions", rec.job_id, rec.to_bytes(), part, hs))
            await self.w.apply_decision(rec, part, in_stream=False)
        finally:
            held = self.w.inflight.get(rec.job_id)
            if held is not None and held[0].decision_id == rec.decision_id:
                del self.w.inflight[rec.job_id]

    async def _note_waiting(self, p: PendingJob, reason: str, part: int, compute_ms: float) -> Awaitable[Any] | None:
        """Record why a job is still pending, when the reason changed (for ``explain``);
        returns the delivery future."""
        if self.last_reason.get(p.job.job_id) == reason:
            return None
        self.last_reason[p.job.job_id] = reason
        rec = DecisionRecord(
            event_id=new_event_id(), decision_id=f"u-{new_event_id()}", job_id=p.job.job_id, cluster=p.job.cluster,
            attempt=p.attempt, outcome="unschedulable", policy=self.policy.name, latency_ms=0.0,
            step_compute_ms=compute_ms, submit_time=p.job.event_time, reason=reason, step_id=self.step_id,
        )  # fmt: skip
        return await self._send("decisions", rec.job_id, rec.to_bytes(), part)

    async def _check_timeouts(self) -> None:
        now = time.time()
        timeout = self.w.settings.confirm_timeout_s
        for d in list(self.w.running.values()):
            if d is None or d["state"] != "reserved" or d["decision_id"] in self.timed_out:
                continue
            if now - d["reserved_ts"] > timeout:
                r = RunningJob.model_validate(d)
                if not self.views.owns(r.job.cluster, self.owned):
                    continue
                ev = JobLifecycle(job_id=r.job.job_id, cluster=r.job.cluster, state="timed_out", attempt=r.attempt,
                                  decision_id=r.decision_id, node_id=r.node_id,
                                  reason=f"placement not confirmed by 'started' within {timeout:g}s")  # fmt: skip
                part = partition_for(r.job.cluster, self.w.settings.partitions)
                await (await self._send("jobs.lifecycle", ev.job_id, ev.to_bytes(), part))
                self.timed_out.add(r.decision_id)  # only once the broker has it: else retry next step

    async def _send(self, topic: str, key: str, value: bytes, partition: int,
                    headers: list[tuple[str, bytes]] | None = None) -> Awaitable[Any]:  # fmt: skip
        """Hand one message to the producer (``headers``: the job's trace context); returns the
        delivery future (batched by linger)."""
        return await self.w.app.producer.send(self.w.topics[topic].get_topic_name(), key.encode(), value,
                                              partition=partition, timestamp=None, headers=headers or None)  # fmt: skip


def register_loop(w: Worker) -> SchedulingLoop:
    """Run a step every ``step_s`` seconds, and sooner when something happened that can
    change the answer (a job arrived, resources were freed): ``wake()`` starts a step
    ``event_debounce_s`` later, so a burst of arrivals is decided together. With
    ``event_debounce_s`` < 0 the loop ticks on the clock only."""
    loop = SchedulingLoop(w)
    w.loop = loop  # type: ignore[attr-defined]
    step, debounce = w.settings.step_s, w.settings.event_debounce_s

    @w.app.task
    async def scheduling_loop() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(loop.woken.wait(), timeout=step)
            if loop.woken.is_set() and debounce > 0:
                await asyncio.sleep(debounce)
            loop.woken.clear()
            try:
                await loop.tick()
            except Exception:  # a bad step must not kill the worker; the next one retries
                log.exception("scheduling step failed")

    return loop
