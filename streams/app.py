"""The Faust app: topics, changelogged tables and the ``Worker`` that holds them.

``create_app(settings)`` builds one worker's app. Every table write is a transition of
``streams/state.py`` caused by an event: the agents (``streams/agents.py``) apply
submissions, telemetry and lifecycle reports; the scheduling loop (``streams/loop.py``) applies its own decisions once
the broker has acknowledged them on the ``decisions`` topic (writing the cluster's changelog
partition itself, since it runs outside any stream), and the decisions agent applies the
ones a restarted worker finds there that its tables have not seen.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import faust
from opentelemetry import trace
from pydantic import BaseModel

from scheduling.duration_estimate import HistoryDurationPredictor
from scheduling.events import (
    MAX_DEADLETTER_KEY,
    DeadLetter,
    DecisionRecord,
    JobSubmitted,
    partition_for,
)
from scheduling.job import JobRequest
from scheduling.order_context import LearningDurationPredictor
from storage.queries.finished_jobs import FinishedJob
from streams import telemetry
from streams.admission import record_ms
from streams.changelog_faults import ChangelogFaults
from streams.command_faults import CommandFaults
from streams.early_reports import EarlyReports
from streams.finished_log import FinishedLog
from streams.held_ledger import HeldLedger
from streams.offset_watch import OffsetWatch
from streams.settings import Settings
from streams.state import (
    DoneJob,
    PendingJob,
    RunningJob,
    Transition,
    on_decision,
)

log = logging.getLogger("semsched.worker")
_M = TypeVar("_M", bound=BaseModel)

# how long a lifecycle report waits for its job's submission (a restart's backlog; streams/early_reports.py)
EARLY_REPORT_WAIT_S = 300.0
DEADLETTER_RETRY_S = (0.5, 30.0)  # a refused dead letter: the first wait before trying again, and the longest


@dataclass
class Counters:
    accepted: int = 0
    deadletters: int = 0
    decisions_applied: int = 0
    # per topic, logged events the tables had lost, applied at an assignment (log_restore.py; should stay 0):
    restored: dict[str, int] = field(default_factory=dict)
    early_reports: int = 0  # lifecycle reports that came before their job's submission, held until it did
    lifecycle: int = 0
    telemetry: int = 0
    telemetry_late: int = 0  # reports older than the node's latest (or the same one again): not applied
    nodes_silent: int = 0  # nodes this worker marked unhealthy: no report from their agent (streams/silent_nodes.py)
    # input offsets consumption skipped, each sought back to (streams/offset_watch.py; should stay 0):
    offset_gaps: int = 0  # revealed by a later offset
    offset_stalls: int = 0  # a partition's end past what was handled, and nothing arriving
    offsets_lost: int = 0  # sought back to and still not back after a minute: given up (logged as an error)
    deadletter_retries: int = 0  # dead letters the broker did not accept at first (each tried again until it does)
    done_forgotten: int = 0  # done jobs forgotten after SEMSCHED_DONE_RETENTION (streams/done_retention.py)
    notes: dict[str, int] = field(default_factory=dict)

    def note(self, text: str) -> None:
        if text:
            key = text.split(":")[0]
            self.notes[key] = self.notes.get(key, 0) + 1


@dataclass
class Worker:
    """Everything the agents, the loop and the web views share."""

    settings: Settings
    app: faust.App
    topics: dict[str, faust.TopicT]
    nodes: Any
    node_util: Any
    pending: Any
    running: Any
    done: Any
    forgotten: Any  # per partition (str), up to when its done jobs were forgotten (streams/done_retention.py)
    counters: Counters = field(default_factory=Counters)
    started_at: float = field(default_factory=time.time)  # when this worker started reading its inputs (epoch s)
    # per input partition, since when this worker holds it (epoch s; the loop's assignment handler): a
    # partition given later has a backlog of its own (the DAG gate's wait for a parent runs from then)
    holds_since: dict[int, float] = field(default_factory=dict)
    offsets: OffsetWatch = field(default_factory=OffsetWatch)  # every input offset handled (streams/offset_watch.py)
    offset_starts: Any = None  # streams.offset_starts.OffsetStarts, set by register_agents
    # decisions being published (not yet acknowledged and applied): the loop must not
    # decide those jobs again nor give their resources away meanwhile
    inflight: dict[str, tuple[DecisionRecord, Any]] = field(default_factory=dict)
    applied_offsets: dict[int, int] = field(default_factory=dict)  # decisions: partition → last offset handled
    lifecycle_offsets: dict[int, int] = field(default_factory=dict)  # jobs.lifecycle: the same
    lifecycle_handled: dict[int, int] = field(default_factory=dict)  # jobs.lifecycle: partition → the offset after the last one handled
    telemetry_offsets: dict[int, int] = field(default_factory=dict)  # nodes.telemetry: the same
    # (done_ts, job id) of the done records written or recovered: a heap, the oldest first, that
    # streams/done_retention.py forgets them from (entries of records since overwritten or deleted are skipped)
    done_due: list[tuple[float, str]] = field(default_factory=list)
    # node id -> when (monotonic) this worker last applied a report of its agent (streams/silent_nodes.py)
    node_heard: dict[str, float] = field(default_factory=dict)
    # node id -> why this worker refused its agent's latest report (a clock far ahead), until one applies
    node_refused: dict[str, str] = field(default_factory=dict)
    _parsed: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)
    # gangs with a rejected member (rebuilt from the done table once after recovery)
    # keyed by (cluster, gang id): a gang id is its cluster's (found by review: another cluster's gang of the
    # same name counted toward it, or took it down); ("", gang id) for done records older than that key
    # (cluster, gang id) -> {member rejected / finished: when it became done (its done_ts)}
    rejected_gangs: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    finished_gang_members: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    # job id → its ingest span (the parent of the worker's later spans of that job)
    traces: telemetry.JobTraces = field(default_factory=telemetry.JobTraces)
    # run times of finished jobs, for sjf-predicted (in memory; warmed from the archive at start:
    # streams/duration_warm_up.py)
    durations: LearningDurationPredictor = field(default_factory=HistoryDurationPredictor)
    # jobs (cluster, job id: another cluster may reuse an id) whose run time the warm-up found: not taught again
    durations_warmed: set[tuple[str, str]] = field(default_factory=set)
    # the latest finished jobs the estimate learned, taught again to a new duration model (streams/finished_log.py;
    # keeps none unless the policy orders by a duration model: streams/duration_reload.py)
    finished_log: FinishedLog = field(default_factory=lambda: FinishedLog(0))
    deadletters_retrying: int = 0  # dead letters waiting to be tried again (Worker.deadletter)
    restoring: int = 0  # input-log restores under way (streams/log_restore.py): no step runs meanwhile
    restore_due: float | None = None  # until when (monotonic) an assignment's restore holds the loop (the same)
    # decision id -> (job id, partition, node id, command, headers): placement commands the broker refused,
    # sent again while their placements wait for them (streams/step_publication.py resend_commands)
    unsent_commands: dict[str, tuple[str, int, str, bytes, list[tuple[str, bytes]]]] = field(default_factory=dict)
    # lifecycle reports for jobs whose submission this worker has not read yet (streams/early_reports.py)
    early_reports: EarlyReports = field(default_factory=lambda: EarlyReports(max_age_s=EARLY_REPORT_WAIT_S))
    # what the running table holds, per cluster, kept from the writes below (streams/held_ledger.py)
    held: HeldLedger = field(default_factory=HeldLedger)

    async def deadletter(self, raw: bytes, reason: str, message: Any, topic: str) -> None:
        # the whole event, up to the size an event may have (so one refused for another reason can be
        # mended and sent again from its dead letter); a larger one is cut there (its topic allows 4x)
        dl = DeadLetter.of(raw, reason, topic=topic, partition=message.partition, offset=message.offset,
                           key=message.key, keep=self.settings.max_message_bytes,
                           timestamp_ms=record_ms(message))  # fmt: skip
        self.counters.deadletters += 1
        telemetry.count_deadletter(reason, topic=topic, source="worker")
        trace.get_current_span().set_attribute("semsched.deadletter.reason", reason[:500])
        wait, longest = DEADLETTER_RETRY_S
        held = False  # the offset watch holds its clocks from the first refusal on (the agent waits)
        try:
            while True:  # until the broker has it: the event is handled (its offset committed) only then
                try:
                    key = None if message.key is None else message.key[:MAX_DEADLETTER_KEY]
                    await (await self.publish("deadletter", key, dl.to_bytes(), message.partition,
                                              telemetry.inject()))  # fmt: skip
                    break
                except Exception as e:  # refused or timed out; this topic's later events wait meanwhile
                    self.counters.deadletter_retries += 1
                    if not held:
                        held, self.deadletters_retrying = True, self.deadletters_retrying + 1
                    log.error("dead letter from %s@%s:%s not accepted (%s: %s): trying again in %.1f s; this "
                              "topic's later events wait", topic, message.partition, message.offset,
                              type(e).__name__, e, wait)  # fmt: skip
                    await asyncio.sleep(wait)
                    wait = min(2 * wait, longest)
        finally:
            if held:
                self.deadletters_retrying -= 1
        log.warning("dead letter from %s@%s:%s: %s", topic, message.partition, message.offset, reason)

    async def apply_decision(self, rec: DecisionRecord, partition: int, *, in_stream: bool) -> Transition:
        """Apply one of this worker's decisions (first one wins; a repeat is a no-op): from the
        scheduling loop once the broker acknowledged it, or from the ``decisions`` topic when
        a restarted worker replays it. Notices go out before the tables change, so a crash
        in between repeats a notice rather than losing it."""
        pending = self.read("pending", rec.job_id, PendingJob)
        current = None if pending is not None else (self.read("running", rec.job_id, RunningJob)
                                                     or self.read("done", rec.job_id, DoneJob))  # fmt: skip
        t = on_decision(rec, pending, current)
        await self.emit(t, partition)
        self.apply(t, partition=None if in_stream else partition)
        held = self.inflight.get(rec.job_id)
        if held is not None and held[0].decision_id == rec.decision_id:
            del self.inflight[rec.job_id]
        return t

    def observe_finished(self, job: JobSubmitted, run_s: float, finish_s: float) -> None:
        """Teach the duration estimate that ``job``'s current attempt ran ``run_s`` seconds, finishing at
        ``finish_s`` (epoch s), and log it (a new duration model is taught it too). Not a job the
        archive warm-up taught already: its finish, read again after a restart, counts once (by cluster
        too: found by review, another cluster's job of the same id kept this one untaught)."""
        if (job.cluster, job.job_id) in self.durations_warmed:
            return
        self.durations.observe(JobRequest.from_event(job), run_s)
        self.finished_log.add([FinishedJob(job, job.event_time.timestamp(), run_s, finish_s)])

    def confirm_clock(self, reserved_ts: float, cluster: str) -> float:
        """When a reservation's confirmation timeout runs from: its decision, or when this worker came to hold
        its cluster's partition, whichever is later. An inherited reservation (a restart, a partition moved
        here) gets the whole timeout from this worker: its command may only now be sent again
        (streams/uncommanded.py), as the DAG gate counts its waits (streams/dag_gate.py)."""
        return max(reserved_ts, self.holds_since.get(partition_for(cluster, self.settings.partitions), 0.0))

    def wake(self) -> None:
        loop = getattr(self, "loop", None)
        if loop is not None:
            loop.wake()

    async def emit(self, t: Transition, partition: int) -> None:
        """Publish what a transition produced: lifecycle notices (e.g. a rejection) and commands
        for the agents (e.g. fencing a superseded placement); returns once the broker has every
        one (a refusal raises: the caller has not changed its tables yet, see ``apply_decision``)."""
        sent = [await self.publish("jobs.lifecycle", n.job_id.encode(), n.to_bytes(), partition) for n in t.emit]
        sent += [await self.publish("actions", c.node_id.encode(), c.to_bytes(), partition) for c in t.commands]
        if sent:
            await asyncio.gather(*sent)

    async def publish(self, topic: str, key: bytes | None, value: bytes, partition: int,
                      headers: list[tuple[str, bytes]] | None = None) -> Awaitable[Any]:  # fmt: skip
        """Hand one message to the producer; returns its delivery future, which fails when the
        broker refuses it (awaited by every caller: a Faust ``topic.send`` is not, and its
        failure would go unseen)."""
        return await self.app.producer.send(self.topics[topic].get_topic_name(), key, value, partition=partition,
                                            timestamp=None, headers=headers or None)  # fmt: skip

    def changelog_topics(self) -> tuple[str, ...]:
        return tuple(t.changelog_topic.get_topic_name() for t in self.app.tables.values())

    def apply(self, t: Transition, *, partition: int | None = None) -> None:
        """Write a transition to the tables. Inside an agent Faust sends each change to the
        changelog partition of the event being processed; the scheduling loop, which runs
        outside any stream, names the partition (its cluster's) and writes the same way
        Faust's own ``Table.__setitem__`` does: the store, then ``send_changelog``."""
        for name, table, writes in (("pending", self.pending, t.pending), ("running", self.running, t.running),
                                    ("done", self.done, t.done)):  # fmt: skip
            for key, value in writes.items():
                if isinstance(value, DoneJob) and not value.done_ts:
                    value = value.model_copy(update={"done_ts": time.time()})
                gone = table.get(key) if name == "done" and value is None else None
                d = None if value is None else value.model_dump(mode="json")
                if name == "running":
                    self.held.touch(key)
                if partition is None:
                    if d is None:
                        table.pop(key, None)
                    else:
                        table[key] = d
                elif d is None:
                    if key in table.data:
                        del table.data[key]
                        table.send_changelog(partition, key, value=None, value_serializer="raw")
                else:
                    table.data[key] = d
                    table.send_changelog(partition, key, d)
                if d is None:
                    self._parsed.pop((name, key), None)
                    if gone and gone.get("gang_id"):
                        self.forget_gang_member(gone)
                else:
                    self._parsed[(name, key)] = (d, value)
                    if name == "done":
                        heapq.heappush(self.done_due, (d["done_ts"], key))
                        if d.get("gang_id"):
                            self.note_gang_member(d)
        self.counters.note(t.note)

    def note_gang_member(self, done: dict[str, Any]) -> None:
        """A gang member in ``done``: rejected, it takes its gang down; finished, it counts toward it."""
        gang = (done.get("cluster") or "", done["gang_id"])
        if (members := self._gang_members(done["status"])) is not None:
            members.setdefault(gang, {})[done["job_id"]] = float(done.get("done_ts") or 0.0)

    def forget_gang_member(self, done: dict[str, Any]) -> None:
        """A gang member's done record deleted (streams/done_retention.py): it no longer counts."""
        gang = (done.get("cluster") or "", done["gang_id"])
        members = self._gang_members(done["status"])
        if members is not None and gang in members:
            members[gang].pop(done["job_id"], None)
            if not members[gang]:
                del members[gang]

    def _gang_members(self, status: str) -> dict[tuple[str, str], dict[str, float]] | None:
        return {"rejected": self.rejected_gangs, "finished": self.finished_gang_members}.get(status)

    def gang_state(self, cluster: str, gang_id: str, since: float) -> tuple[bool, int]:
        """Whether a member of ``cluster``'s gang ``gang_id`` was rejected, and how many finished, counting
        only members done since ``since`` (the asking member's submission, epoch s): a gang id used again
        after the gang it named was over is another gang (found by review: yesterday's finished members were
        subtracted from today's gang of that id, which was then rejected as too many members, or placed
        piece by piece). A done record older than the cluster key counts toward a gang of that id in any
        cluster, and one older than ``done_ts`` counts in any case, as before."""
        keys = ((cluster, gang_id), ("", gang_id))

        def members(of: dict[tuple[str, str], dict[str, float]]) -> set[str]:
            return {job for k in keys for job, ts in of.get(k, {}).items() if not ts or ts >= since}

        return bool(members(self.rejected_gangs)), len(members(self.finished_gang_members))

    def read(self, name: str, key: str, model: type[_M]) -> _M | None:
        """The record at ``key`` of table ``name``, parsed once: records this process wrote are
        kept beside the table (the same dict object), others (recovered from the changelog)
        are parsed on first read."""
        d = getattr(self, name).get(key)
        if d is None:
            return None
        hit = self._parsed.get((name, key))
        if hit is not None and hit[0] is d:
            return hit[1]  # type: ignore[return-value]
        parsed = model.model_validate(d)
        self._parsed[(name, key)] = (d, parsed)
        return parsed


def create_app(settings: Settings, *, app_id: str | None = None) -> Worker:
    app = faust.App(
        app_id or f"{settings.topic_prefix}worker",
        broker=f"kafka://{settings.bootstrap}",
        store="memory://",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=False,  # streams/topics.py creates every topic (Kafka 4.x)
        topic_disable_leader=True,
        value_serializer="raw",
        key_serializer="raw",
        web_enabled=settings.web_port > 0,
        web_port=max(settings.web_port, 1),
        web_bind="127.0.0.1",
        consumer_auto_offset_reset="earliest",
        producer_max_request_size=max(settings.max_message_bytes * 4, 1024 * 1024),
        # decisions and commands go out in bursts (one per placement): batch them
        producer_linger=0.005,
        producer_max_batch_size=256 * 1024,
        consumer_max_fetch_size=max(settings.max_message_bytes * 4, 1024 * 1024),
        datadir=str(settings.state_dir / "faust"),
        table_cleanup_interval=30.0,
        # a crashed worker's partitions move to its replacement after this long
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 4),
    )
    topics = {
        name: app.topic(settings.topic(name), key_type=bytes, value_type=bytes, partitions=settings.partitions,
                        internal=False)  # fmt: skip
        for name in ("jobs.submitted", "nodes.telemetry", "jobs.lifecycle", "decisions", "actions", "deadletter")
    }
    # keys and values as JSON on the changelog: str keys, dict values (pydantic dumps)
    schema = faust.Schema(key_type=str, value_type=None, key_serializer="json", value_serializer="json")
    tables = dict(schema=schema, partitions=settings.partitions)
    w = Worker(
        settings=settings,
        app=app,
        topics=topics,
        nodes=app.Table("nodes", default=None, help="latest telemetry per node", **tables),
        node_util=app.Table("node_util", default=list, help="GPU/CPU utilisation, hopping window", **tables)
        .hopping(size=timedelta(seconds=60), step=timedelta(seconds=30), expires=timedelta(minutes=10))
        .relative_to_stream(),
        pending=app.Table("pending", default=None, help="accepted jobs waiting for a node", **tables),
        running=app.Table("running", default=None, help="placed jobs holding resources", **tables),
        done=app.Table("done", default=None, help="finished or rejected jobs", **tables),
        forgotten=app.Table("forgotten", default=None, help="per partition, the forgotten watermark", **tables),
    )
    # Table writes queue changelog messages; past this many queued, Faust pauses every stream
    # until they drain (its default, 100, stalls ingest under a few hundred jobs/s).
    app.producer.buffer.max_messages = 2000
    ChangelogFaults.from_env().install([w.pending, w.running, w.done])  # none unless a test asks
    CommandFaults.from_env().install(w)  # (the same)
    from streams.agents import register_agents
    from streams.log_restore import register_log_restore
    from streams.loop import register_loop

    register_agents(w)
    register_log_restore(w)
    from streams.web import register_web

    register_loop(w)
    register_web(w)
    return w
