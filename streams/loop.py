"""The scheduling loop: every ``step`` seconds (and soon after an arrival or freed
resources), snapshot the tables, run the policy, publish the decisions to ``decisions``,
apply them to the tables once the broker has acknowledged them, then publish the commands
to ``actions`` for the cluster agents.

Order matters. A decision is durable before its job changes state, and before its
command exists: a worker that dies in between finds the decision on the ``decisions``
topic when it restarts (it replays that topic before it schedules again, see
``catchup.py``) and the job reserved; if no agent ever confirms, the confirmation
timeout re-queues it (checked only once the lifecycle reports already on the topic are
applied: a restarted worker would otherwise time out jobs whose ``started`` it has not read
yet). Decision ids are deterministic per (job, attempt, submission), so a decision repeated after a
restart is the same decision to the agents and the archive.

A rebalance waits for the step under way. The step awaits (the model server, the broker's
acknowledgements), and a partition revoked meanwhile goes to a worker that replays the
``decisions`` topic to its end offset at assignment: a decision the old owner published after
that read would not be replayed there, and both would place the job. So the loop's
``on_partitions_revoked`` receiver (which Faust awaits before the consumer rejoins the group, and
the group assigns no partition before every member rejoins) fences the revoked partitions, so that no
step starts on them until the next assignment, and waits for the step under way to end, its
decisions acknowledged, before the new owner can read the topic's end. A step reads the fence again
after its awaits (the DAG gate's records, the model call). If the wait runs out (``REVOKE_WAIT_S``),
the step under way applies none of its decisions there and sends no command (the new owner applies
them from the topic), until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from scheduling.assign import schedule_step
from scheduling.duration_estimate import estimator_for
from scheduling.events import DecisionRecord, JobLifecycle, partition_for, step_id_for
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.node_table import NodeTable
from scheduling.order_context import OrderContext, TenantUsage, cluster_capacity
from scheduling.orderings.compose import queue_order
from scheduling.policies import Policy, get_policy
from streams import telemetry
from streams.agents import lifecycle_partitions
from streams.catchup import CatchUp
from streams.dag_gate import dag_gate
from streams.decision_records import (
    StepModel,
    placed_record,
    placement_command,
    predicted_durations,
    rejected_record,
    waiting_record,
)
from streams.done_retention import DoneRetention
from streams.duration_reload import register_duration_reload
from streams.heap import freeze_start_up_heap
from streams.log_restore import restore_due
from streams.lost_nodes import LostNodes
from streams.model_status import ModelStatus
from streams.node_utilisation import step_utilisation
from streams.policy_warm_up import PolicyWarmUp
from streams.silent_nodes import SilentNodes
from streams.snapshot_cache import SnapshotCache
from streams.state import PendingJob, RunningJob
from streams.step_publication import StepPublication, resend_commands
from streams.table_views import TableViews
from streams.uncommanded import Uncommanded

if TYPE_CHECKING:
    from streams.app import Worker
    from streams.settings import Settings

log = logging.getLogger("semsched.loop")

#: a job that fits no node of a cluster is rejected only once the cluster's node list has
#: not changed for this long (nodes arrive one telemetry event at a time)
INVENTORY_SETTLE_S = 10.0
#: how long a revocation waits for the step under way (half of Faust's default rebalance timeout,
#: 60 s, within which every member must rejoin; a step's model call has a 0.5 s deadline and its
#: producer hand-over at most 60 s when the broker does not answer)
REVOKE_WAIT_S = 30.0


def build_policy(settings: Settings) -> Policy:
    """The worker's policy, ``settings.policy``. The learned placement (``learned``, or composed as
    ``<ordering>+learned``) gets ``settings.fallback_policy``, the heuristic that decides when its
    model is absent, slow or down; the heuristics take no such option."""
    from inference.policy import uses_learned  # (registers "learned"; torch loads only with a model)

    kwargs = {"fallback": settings.fallback_policy} if uses_learned(settings.policy) else {}
    return get_policy(settings.policy, **kwargs)


class SchedulingLoop:
    def __init__(self, w: Worker) -> None:
        self.w = w
        self.policy = build_policy(w.settings)
        w.durations = estimator_for(self.policy)  # sjf-learned: finishing jobs teach its own predictor
        self.catchup = CatchUp(w.settings, w.settings.topic("decisions"), group_id=w.app.conf.id)
        w.app.on_partitions_assigned.connect(self.catchup.on_partitions_assigned)
        self.lifecycle_catchup = CatchUp(w.settings, w.settings.topic("jobs.lifecycle"), group_id=w.app.conf.id,
                                         holds="the confirmation timeout")  # fmt: skip
        w.app.on_partitions_assigned.connect(self.lifecycle_catchup.on_partitions_assigned)
        w.app.on_rebalance_complete.connect(self._on_rebalance_complete)
        w.app.on_partitions_revoked.connect(self._on_partitions_revoked)
        w.app.on_partitions_assigned.connect(self._on_partitions_assigned)
        self.owned: set[int] = set()
        self.fenced: set[int] = set()  # decisions partitions revoked since the last assignment: no step on them
        # those whose revocation stopped waiting for the step under way: it applies and commands nothing there
        self.abandoned: set[int] = set()
        self._ticking = asyncio.Lock()  # held by a step under way (a revocation waits for it)
        self._gangs_scanned = False
        self._inventory_size: dict[str, int] = {}
        self._inventory_since: dict[str, float] = {}
        self.timed_out: set[str] = set()  # decision ids whose timeout we already announced
        self.uncommanded = Uncommanded(w)  # placements reserved without a command on the way: sent again
        self.lost_nodes = LostNodes(self)  # placements on nodes unhealthy for too long are moved off
        self.silent_nodes = SilentNodes(self)  # nodes whose agent fell silent are marked unhealthy
        self.retention = DoneRetention(self)  # done jobs are forgotten SEMSCHED_DONE_RETENTION after they end
        self._timeouts_checked = -1e9  # when _check_timeouts last read the running table (monotonic)
        self.last_reason: dict[str, str] = {}
        self.views = TableViews(w)
        self.steps = 0
        # per cluster, the snapshot a step starts from, kept from step to step (streams/snapshot_cache.py)
        self.snapshots = SnapshotCache(w.held, verify_s=w.settings.snapshot_verify_s)
        self.tables: dict[str, NodeTable] = self.snapshots.tables  # per cluster: the node table steps build on
        self.step_id = ""  # the step being decided (on its decision records)
        self.stats: dict[str, float] = {"tick_s": 0.0, "pending_seen": 0, "holdings_seen": 0, "placed": 0, "deferred": 0,
                                        "compute_s": 0.0, "publish_s": 0.0}  # fmt: skip
        self.warm_up = PolicyWarmUp(self)  # (adds its counters to the stats)
        self.model_status = ModelStatus(self.policy)  # model or fallback: logged when it changes
        self.woken = asyncio.Event()
        self.step_trace: telemetry.StepTrace | None = None  # spans of the cluster step under way

    async def _on_rebalance_complete(self, sender: object = None, *args: object, **kwargs: object) -> None:
        """Faust's signal after a rebalance's table recovery: the ledger reads the running table whole."""
        self.w.held.invalidate()

    async def _on_partitions_revoked(self, sender: object = None, revoked: Any = (), **kwargs: object) -> None:
        """Faust's signal while a rebalance takes partitions away (awaited before the consumer rejoins):
        no step starts on them from now on, and the step under way ends first (module docstring)."""
        self.fenced |= {tp.partition for tp in revoked if tp.topic == self.catchup.topic}
        if not self._ticking.locked():
            return
        started = time.monotonic()
        try:
            async with asyncio.timeout(REVOKE_WAIT_S):
                async with self._ticking:
                    pass
        except TimeoutError:
            self.abandoned |= {tp.partition for tp in revoked if tp.topic == self.catchup.topic}
            log.warning("the step under way did not end within %gs of a rebalance: its decisions may reach "
                        "the decisions topic after a new owner read its end; it sends none of their commands "
                        "there", REVOKE_WAIT_S)  # fmt: skip
        else:
            log.info("rebalance waited %.3fs for the step under way", time.monotonic() - started)

    async def _on_partitions_assigned(self, sender: object = None, *args: object, **kwargs: object) -> None:
        """Faust's signal after a rebalance: what the consumer is assigned now is this worker's to decide
        (once caught up: the gates close on every assignment). A partition this worker did not hold at the
        last assignment is held since now (``Worker.holds_since``)."""
        now = time.time()
        held = {tp.partition for tp in self.w.app.consumer.assignment() if tp.topic == self.catchup.topic}
        self.w.holds_since = {p: self.w.holds_since.get(p, now) for p in held}
        self.fenced.clear()
        self.uncommanded.reassigned()

    def deciding(self) -> set[int]:
        """The partitions a step may decide on now: owned, not revoked since the last assignment, nor given up
        by a rebalance that stopped waiting for the step under way (found by the review of the change: that
        step went on to the tick's later clusters, whose partitions the rebalance had given away)."""
        return self.owned - self.fenced - self.abandoned

    def wake(self) -> None:
        """Something changed (arrival, freed resources): step soon instead of on the clock."""
        if self.w.settings.event_debounce_s >= 0:
            self.woken.set()

    # -- one step ---------------------------------------------------------------------------
    async def tick(self) -> None:
        """One step over every owned cluster (a revocation waits for it to end)."""
        async with self._ticking:
            # a step the last rebalance stopped waiting for has ended by now (it held the lock): its partitions
            # are no longer held back from what a step applies (not at the assignment, which can come before it
            # ends: found by review, it then applied and commanded on a partition another worker owned)
            self.abandoned.clear()
            await self._tick()

    def recovering(self) -> bool:
        """Faust's table recovery, or this worker's restore of the input logs (which runs in Faust's
        on_rebalance_complete, where in_recovery may already be False and `completed` stays set from
        the first start): no step, no timeout, until the tables hold what the logs say. Also while Faust
        rebalances: it sets ``rebalancing`` in aiokafka's revocation callback, before this loop's own
        revocation receiver has run (found by review: a step started in between decided on partitions
        about to go), and clears it once the recovery that follows is done."""
        app = self.w.app
        return (bool(getattr(app, "rebalancing", False)) or bool(app.in_recovery)
                or not app.tables.recovery.completed.is_set() or restore_due(self.w))  # fmt: skip

    async def _tick(self) -> None:
        app = self.w.app
        recovering = self.recovering()
        assigned = {tp.partition for tp in app.consumer.assignment() if tp.topic == self.catchup.topic} - self.fenced
        was_open = self.catchup.open
        if not await self.catchup.ready(self.w.applied_offsets, recovering=recovering, assigned=assigned):
            self.w.held.invalidate()  # the tables are being recovered: read them whole once they are
            return
        if self.recovering():  # a rebalance began while the gate looked up the end offsets (review)
            return
        if not was_open or recovering or assigned != self.owned:
            # a rebalance (even one that gave back the same partitions: their recovery rewrote the
            # tables without Worker.apply) or a recovery: the ledger reads the running table whole,
            # and the gangs' members are read from the done table again
            self.w.held.invalidate()
            self._gangs_scanned = False
        # only the clusters whose partitions this worker owns: the tables may also hold
        # standby replicas and keys of partitions that moved to another worker
        self.owned = assigned
        if not self._gangs_scanned:  # once the recovered done table is there (Faust's recovery skips apply)
            self.w.rejected_gangs.clear()  # (the recovery may have deleted records: done_retention.py)
            self.w.finished_gang_members.clear()
            for d in list(self.w.done.values()):
                if d and d.get("gang_id"):
                    self.w.note_gang_member(d)
            self.retention.rescan()
            self._gangs_scanned = True
        lifecycle = lifecycle_partitions(self.w) - self.fenced
        if await self.lifecycle_catchup.ready(self.w.lifecycle_offsets, recovering=recovering, assigned=lifecycle):
            await self._check_timeouts()  # a 'started' still in the backlog is not a missing one
            await self.silent_nodes.check()
            await self.lost_nodes.check()
            # (after the timeouts, and the placements moved off lost nodes)
            await self.uncommanded.send(self.deciding(), self.timed_out | self.lost_nodes.preempted, self.policy.name)
        await self.retention.sweep()  # done jobs past SEMSCHED_DONE_RETENTION
        if self.w.unsent_commands:  # placement commands the broker refused: again, while still wanted (not one
            # moved off a lost node: found by review, it went out after its fence)
            await resend_commands(self.w, self.deciding(), self.timed_out | self.lost_nodes.preempted)
        pending = self.views.pending(self.owned)
        telemetry.observe_queue(pending)
        if not pending:
            await self.warm_up.idle_clusters()
            return
        t0 = time.perf_counter()
        nodes = self.views.nodes(self.owned)
        failed: Exception | None = None
        for cluster, jobs in pending.items():
            if not self.views.owns(cluster, self.deciding()):  # revoked during this tick's earlier steps
                continue
            views = nodes.get(cluster)
            self.track_inventory(cluster, len(views or ()))
            if not views:  # jobs wait, and say why (their records acknowledged together, not one by one:
                part = partition_for(cluster, self.w.settings.partitions)  # found by review, 5 s per 1,000)
                said = [await self._note_waiting(p, f"no nodes known in cluster {cluster!r} yet", part, 0.0)
                        for p, _ in jobs]  # fmt: skip
                for answer in await asyncio.gather(*(f for f in said if f is not None), return_exceptions=True):
                    if isinstance(answer, BaseException):
                        raise answer
                continue
            try:  # one cluster's failure is its own: the others' steps go on, and the first is raised after them
                # (found by review: it skipped them all, and one that repeats would have starved every cluster after it)
                with telemetry.step_trace(cluster, self.policy.name, self.w.traces, len(jobs)) as self.step_trace:
                    await self._step_cluster(cluster, views, jobs)
            except Exception as e:
                self.w.counters.note(f"scheduling step failed: {cluster}")
                if failed is not None:  # (one line each: a broker down fails them all, the first is raised below)
                    log.warning("scheduling step of cluster %r failed too, its jobs wait for the next step: %s: %s",
                                cluster, type(e).__name__, e)  # fmt: skip
                failed = failed or e
        self.steps += 1
        self.stats["tick_s"] += time.perf_counter() - t0
        self.stats["pending_seen"] += sum(len(j) for j in pending.values())
        self.stats["snapshot_builds"] = self.snapshots.builds
        self.stats["snapshot_mismatches"] = self.snapshots.mismatches
        self.snapshots.forget(set(nodes))
        # forget cache entries of jobs that left the queue
        queued = self.views.forget_left_jobs()
        for job_id in [j for j in self.last_reason if j not in queued]:
            del self.last_reason[job_id]
        if failed is not None:
            raise failed

    async def _step_cluster(self, cluster: str, views: list[NodeView],
                            jobs: list[tuple[PendingJob, JobRequest]]) -> None:  # fmt: skip
        tick_ts = time.time()
        self.step_id = step_id_for(cluster, self.steps, tick_ts)  # on every decision of this step
        # the nodes minus what placed jobs hold, kept from the last step (streams/snapshot_cache.py);
        # the ledger is read up to the table here, with no await before the snapshot is taken
        self.w.held.sync(self.w.running, self.views.holding)
        snap = self.snapshots.snapshot(cluster, views, lambda: self.views.holdings(self.owned))
        through = self.w.lifecycle_handled.get(partition_for(cluster, self.w.settings.partitions))
        index = snap.table.index
        inflight = self.views.inflight(cluster)  # placements being published hold their resources too
        self.stats["holdings_seen"] += len(self.w.held.held(cluster)) + len(inflight)
        for req, why in snap.reserve_many([(index[n], req, gpus) for n, req, gpus in inflight if n in index]):
            log.warning("cannot account %s: %s", req.job_id, why)
        part = partition_for(cluster, self.w.settings.partitions)
        st = self.step_trace  # opened by tick() around this call
        assert st is not None
        jobs, held_back = dag_gate(self.w, jobs)
        # the gate's rejections and waiting records are acknowledged together (found by review: one by one,
        # 5 s per 1,000 jobs, and a step could outlast a rebalance's wait for it)
        gate = StepPublication(self.w, part, st, still_owned=lambda: part not in self.abandoned)
        try:
            for p, reason, permanent in held_back:
                if permanent:
                    rec = self._rejection(p, reason, 0.0)
                    await gate.decide(rec, None, st.decide(rec.job_id, rec.decision_id, outcome="rejected",
                                                           latency_ms=rec.latency_ms))  # fmt: skip
                elif fut := await self._note_waiting(p, reason, part, 0.0):
                    gate.waiting(fut)
        except Exception as e:  # the producer refused a hand-over: what it took still goes through
            gate.refused(e)
        await gate.settle()
        if not self.views.owns(cluster, self.deciding()):  # revoked while the gate's records settled
            return
        by_id = {p.job.job_id: (p, r) for p, r in jobs}
        context = OrderContext(
            tenant_held=TenantUsage(lambda: [h[1] for h in (*self.w.held.held(cluster).values(), *inflight)]),
            capacity=cluster_capacity(snap),
            queued_since={p.job.job_id: p.queued_ts for p, _ in jobs if p.attempt > 0},
            attained_service={p.job.job_id: p.attained for p, _ in jobs if p.attained > 0},  # (las, gittins)
            estimator=self.w.durations,
        )  # orderings (drf, las, priority, sjf) read it; placements ignore it
        # ordered once (an ordering may have state): a model-backed placement's call covers the first jobs that fit
        requests = queue_order(self.policy, [r for _, r in jobs], tick_ts, context)
        prepare = getattr(self.policy, "prepare_step", None)  # a model-backed placement: one call per step
        model_s = time.perf_counter()
        if prepare is not None and requests:
            # async: a model server's deadline does not block the loop. The nodes' measured utilisation
            # (hopping window) is read only for a model version that reads it, known once the policy
            # looked for a new version
            await prepare(snap, requests, tick_ts, utilisation=lambda: step_utilisation(self.w, views))
        model_s = time.perf_counter() - model_s
        if not self.views.owns(cluster, self.deciding()):  # revoked while the model answered
            return
        result = schedule_step(snap, requests, self.policy, now=tick_ts, context=context, in_order=True,
                               hold_s=self.w.settings.step_hold_s or None)  # fmt: skip
        result.compute_ms += model_s * 1000.0  # the step's compute includes its model call
        if result.deferred:  # the step's hold ended it: the rest in the next step, a debounce later (not on the
            self.stats["deferred"] += len(result.deferred)  # clock, even with SEMSCHED_EVENT_DEBOUNCE < 0:
            self.woken.set()  # a burst would go at one hold per step; found by review)
            st.span.set_attribute("semsched.deferred", len(result.deferred))  # (the step span's, review)
        model = StepModel.of(self.policy)  # read after the step: which model version decided, or why not
        if prepare is not None and requests:
            self.model_status.observe()
        durations = predicted_durations(self.w.durations, [by_id[pl.job_id][1] for pl in result.placements])
        self.stats["compute_s"] += result.compute_ms / 1000
        self.stats["placed"] += len(result.placements)
        gangs: dict[str, set[str]] = {}  # each gang this step places: all its members run, or none does
        for pl in result.placements:
            if gang := by_id[pl.job_id][1].gang_id:
                gangs.setdefault(gang, set()).add(pl.job_id)
        pub = StepPublication(self.w, part, st, gangs, still_owned=lambda: part not in self.abandoned)
        try:
            for pl in result.placements:
                p, req = by_id[pl.job_id]
                rec = placed_record(p, pl, cluster=cluster, policy=self.policy.name, step_id=self.step_id,
                                    compute_ms=result.compute_ms, model=model, durations=durations,
                                    lifecycle_through=through)  # fmt: skip
                cmd = placement_command(p, rec)
                self.last_reason.pop(p.job.job_id, None)
                hs = st.decide(rec.job_id, rec.decision_id, outcome="placed", latency_ms=rec.latency_ms, node_id=pl.node_id)
                await pub.decide(rec, req, hs, command=(cmd.node_id, cmd.to_bytes()))
            settled = time.time() - self._inventory_since.get(cluster, 0.0) >= INVENTORY_SETTLE_S
            for un in result.unschedulable:
                p, _ = by_id[un.job_id]
                if un.permanent and settled:
                    rec = self._rejection(p, f"can never run in cluster {cluster!r}: {un.reason}", result.compute_ms)
                    hs = st.decide(rec.job_id, rec.decision_id, outcome="rejected", latency_ms=rec.latency_ms)
                    await pub.decide(rec, None, hs)
                elif fut := await self._note_waiting(p, un.reason, part, result.compute_ms):
                    pub.waiting(fut)  # may fit later (resources free up, more nodes arrive)
        except Exception as e:  # the producer refused a hand-over: what it took still goes through
            pub.refused(e)
        # every decision is acknowledged by the broker before its job changes state and before its
        # command goes out; the decisions topic stays the log a restarted worker replays
        t_pub = time.perf_counter()
        try:
            await pub.settle()
        finally:
            self.stats["publish_s"] += time.perf_counter() - t_pub

    def track_inventory(self, cluster: str, nodes: int) -> None:
        if self._inventory_size.get(cluster) != nodes:
            self._inventory_size[cluster] = nodes
            self._inventory_since[cluster] = time.time()

    def inventory_since(self, cluster: str) -> float:
        """When ``cluster``'s node count last changed (wall clock; 0 if never seen)."""
        return self._inventory_since.get(cluster, 0.0)

    def _rejection(self, p: PendingJob, reason: str, compute_ms: float) -> DecisionRecord:
        return rejected_record(p, reason, policy=self.policy.name, step_id=self.step_id, compute_ms=compute_ms)

    async def _note_waiting(self, p: PendingJob, reason: str, part: int, compute_ms: float) -> Awaitable[Any] | None:
        """Record why a job is still pending, when the reason changed (for ``explain``); returns its
        delivery. A record the producer or the broker refused is said again at the next step."""
        job_id = p.job.job_id
        if self.last_reason.get(job_id) == reason:
            return None
        rec = waiting_record(p, reason, policy=self.policy.name, step_id=self.step_id, compute_ms=compute_ms)
        delivery = await self._send("decisions", rec.job_id, rec.to_bytes(), part)
        self.last_reason[job_id] = reason

        async def delivered() -> Any:
            try:
                return await delivery
            except BaseException:
                if self.last_reason.get(job_id) == reason:
                    del self.last_reason[job_id]
                raise

        return delivered()

    async def _check_timeouts(self) -> None:
        """Announce ``timed_out`` for placements not confirmed within ``confirm_timeout_s``: a pass over
        the running table, at most every ``min(1 s, timeout / 4)`` (not at every step: under load
        the steps come many times a second, and the table holds thousands of jobs)."""
        now, checked = time.time(), time.monotonic()
        timeout = self.w.settings.confirm_timeout_s
        if checked - self._timeouts_checked < min(1.0, timeout / 4):
            return
        self._timeouts_checked = checked
        placed = set()
        for d in list(self.w.running.values()):
            if d is not None:
                placed.add(d["decision_id"])
            if d is None or d["state"] != "reserved" or d["decision_id"] in self.timed_out:
                continue
            if now - self.w.confirm_clock(d["reserved_ts"], d["job"]["cluster"]) > timeout:
                r = RunningJob.model_validate(d)
                if not self.views.owns(r.job.cluster, self.owned):
                    continue
                ev = JobLifecycle(job_id=r.job.job_id, cluster=r.job.cluster, state="timed_out", attempt=r.attempt,
                                  decision_id=r.decision_id, node_id=r.node_id,
                                  reason=f"placement not confirmed by 'started' within {timeout:g}s")  # fmt: skip
                part = partition_for(r.job.cluster, self.w.settings.partitions)
                await (await self._send("jobs.lifecycle", ev.job_id, ev.to_bytes(), part))
                self.timed_out.add(r.decision_id)  # only once the broker has it: else retry next step
        self.timed_out &= placed

    async def _send(self, topic: str, key: str, value: bytes, partition: int,
                    headers: list[tuple[str, bytes]] | None = None) -> Awaitable[Any]:  # fmt: skip
        """Hand one message to the producer (``headers``: the job's trace context); returns the
        delivery future (batched by linger)."""
        return await self.w.publish(topic, key.encode(), value, partition, headers)


def register_loop(w: Worker) -> SchedulingLoop:
    """Run a step every ``step_s`` seconds, and sooner when something happened that can
    change the answer (a job arrived, resources were freed): ``wake()`` starts a step
    ``event_debounce_s`` later, so a burst of arrivals is decided together. With
    ``event_debounce_s`` < 0 the loop ticks on the clock only."""
    loop = SchedulingLoop(w)
    w.loop = loop  # type: ignore[attr-defined]
    register_duration_reload(w, loop.policy)  # a new duration model without a restart (sjf-learned, gittins-learned)
    step = w.settings.step_s  # (settings copied with another step skip the validation: the debounce stays within it)
    debounce = min(w.settings.event_debounce_s, step)

    @w.app.task
    async def scheduling_loop() -> None:
        await loop.warm_up.at_start()
        freeze_start_up_heap(loop.stats)  # a full collection over them would pause a step (streams/heap.py)
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
