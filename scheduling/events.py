"""The event contracts: every message on every semsched topic, as pydantic v2 models.

This module is the single schema. JSON on the wire (UTF-8, one object per message),
``schema_version`` on every event, a unique ``event_id`` (the dedupe key everywhere,
including the archive) and a timezone-aware UTC ``event_time``.

Topics and what they carry (see ``TOPIC_EVENTS``):

- ``jobs.submitted``  — :class:`JobSubmitted` (key: job id)
- ``nodes.telemetry`` — :class:`NodeTelemetry` (key: node id)
- ``jobs.lifecycle``  — :class:`JobLifecycle` (key: job id)
- ``decisions``       — :class:`DecisionRecord` (the worker's own log of what it decided)
- ``actions``         — :data:`Command`: placement, preemption, node isolation, restart
- ``deadletter``      — :class:`DeadLetter` (the original bytes and a reason)

All topics are partitioned by cluster (:func:`partition_for`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import uuid
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)

from scheduling.gpu_models import KNOWN_GPU_MODELS

SCHEMA_VERSION = 1

# Upper bounds beyond which a request is absurd rather than large (a typo, a unit
# mistake, an overflow). Generous: the biggest nodes of 2026 sit far below them.
MAX_CPU_MILLI = 1_024_000  # 1,024 cores
MAX_MEMORY_MIB = 16 * 1024 * 1024  # 16 TiB
MAX_GPUS = 64
MAX_GANG = 4096
MAX_TEXT = 4096
# What the archive's columns hold (storage/rows.py): an event the models accept must convert to its
# table's row, or the archiver could not write its batch. Attempts are UInt16, counts UInt32,
# exit codes Int32, times DateTime64(3) (ClickHouse clamps a time outside this range silently).
MAX_ATTEMPT = 65_535
MAX_UINT32 = 2**32 - 1
FIRST_TIME, LAST_TIME = datetime(1900, 1, 1, tzinfo=UTC), datetime(2299, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)

QoS = Literal["LS", "BE", "Burstable", "Guaranteed"]


def _integral(v: object) -> object:
    return int(v) if isinstance(v, float) and v.is_integer() else v


#: an integer field of an event that producers and agents write. Decoding is strict ("1000" and
#: true are refused), but 1000.0 is 1000: JSON has one number type, JSON Schema's "integer"
#: admits it, and encoders of floats write it so (Python's json.dumps(1000.0)). 1000.5 is refused.
WireInt = Annotated[int, BeforeValidator(_integral)]


def _exit_status(v: object) -> object:
    """A 32-bit exit status written unsigned (4294967295, as Windows reports -1) as the signed one."""
    v = _integral(v)
    return v - 2**32 if isinstance(v, int) and not isinstance(v, bool) and 2**31 <= v < 2**32 else v


ExitCode = Annotated[int, BeforeValidator(_exit_status), Field(ge=-(2**31), le=2**31 - 1)]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_event_id() -> str:
    return uuid.uuid4().hex


def partition_for(cluster: str, partitions: int) -> int:
    """The partition of every topic that carries ``cluster``'s events (stable across runs)."""
    return zlib.crc32(cluster.encode()) % partitions


def step_id_for(cluster: str, n: int, tick: float) -> str:
    """A scheduling step's id, on every decision record of the step: ``<cluster>:<n>:<tick>``, ``tick`` the
    step's clock (epoch s), at which the worker computes its jobs' features (:func:`step_tick` reads it)."""
    return f"{cluster}:{n}:{tick:.3f}"


def step_tick(step_id: str) -> float | None:
    """The clock of the step :func:`step_id_for` named, or None for any other name."""
    try:
        return float(step_id.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def decision_id_for(job_id: str, attempt: int, submission: str) -> str:
    """Deterministic: a worker that re-decides the same attempt after a restart emits the
    same id, so agents and the archive see one decision, never two. ``submission``: the event id
    of the job's submission, so a job id used again once its first job was forgotten
    (streams/done_retention.py) has decisions of its own, not the first job's (which agents that
    remember them would take for repeats)."""
    return hashlib.sha1(f"{job_id}#{attempt}#{submission}".encode()).hexdigest()[:20]


def is_decision_of(decision_id: str | None, job_id: str, attempt: int, submission: str) -> bool:
    """Whether ``decision_id`` is that attempt's: :func:`decision_id_for`'s, or the id the same attempt had
    before ids named the submission (per job and attempt only, until 2026-12-04), so that a report of a
    placement made before an upgrade is still recognised as that placement's."""
    if not decision_id:
        return False
    legacy = hashlib.sha1(f"{job_id}#{attempt}".encode()).hexdigest()[:20]
    return decision_id in (decision_id_for(job_id, attempt, submission), legacy)


def archived_time(v: datetime, field: str) -> datetime:
    """``v`` in UTC, within what the archive holds; ``ValueError`` otherwise. A time near year 1 or 9999 with
    an offset cannot even be converted (``OverflowError``: found by review, it escaped as no validation
    error and stopped the worker's agent for that topic, and the archiver)."""
    try:
        v = v.astimezone(UTC)
    except (OverflowError, ValueError) as e:
        raise ValueError(f"{field} {v.isoformat()} cannot be converted to UTC ({e})") from None
    if not FIRST_TIME <= v <= LAST_TIME:
        raise ValueError(f"{field} {v.isoformat()} is outside {FIRST_TIME:%Y-%m-%d} .. {LAST_TIME:%Y-%m-%d}, "
                         "the range the archive holds")  # fmt: skip
    return v


def with_record_identity(ev: Event, topic: str, partition: int, offset: int, timestamp_ms: int | None) -> Event:
    """``ev`` as read from ``topic[partition]@offset``: a producer that left out ``event_id``
    gets one derived from that place, and one that left out ``event_time`` gets the record's
    timestamp. Every reader of the record (the worker, the archiver, a restore) then holds the
    same id and time; each used to draw its own uuid and clock. ``ValueError`` when that timestamp is
    outside what the archive holds."""
    update: dict[str, Any] = {}
    if "event_id" not in ev.model_fields_set:
        update["event_id"] = hashlib.sha1(f"{topic}:{partition}:{offset}".encode()).hexdigest()[:32]
    # (a timestamp of 0 or -1 is none, as DeadLetter.of and the done-retention watermark take it; found by review:
    # a 1970 submit time put the job ahead of every other in FIFO order)
    if "event_time" not in ev.model_fields_set and timestamp_ms is not None and timestamp_ms > 0:
        # (model_copy does not validate: the record's time is checked here; ValueError when out of range)
        update["event_time"] = record_time(timestamp_ms)
    return ev.model_copy(update=update) if update else ev


def record_time(timestamp_ms: int) -> datetime:
    """A record's Kafka timestamp (ms) as a time the archive holds; ``ValueError`` when it is none."""
    try:
        stamp = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    except (OverflowError, OSError, ValueError) as e:
        raise ValueError(f"the record's timestamp {timestamp_ms} ms is no time ({e})") from None
    return archived_time(stamp, "the record's timestamp")


def derived_event_id(cause_event_id: str, what: str) -> str:
    """Deterministic: the id of an event the worker derives from another (a rejection notice from
    the failure that gave its job up), so handling the cause again repeats the same event."""
    return hashlib.sha1(f"{what}#{cause_event_id}".encode()).hexdigest()[:32]


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(default_factory=new_event_id, min_length=1, max_length=128)
    event_time: AwareDatetime = Field(default_factory=utcnow)

    @field_validator("event_time")
    @classmethod
    def _to_utc(cls, v: datetime) -> datetime:
        return archived_time(v, "event_time")

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()


class JobSubmitted(Event):
    """A job (a pod, a task, an instance) asks to run."""

    kind: Literal["job_submitted"] = "job_submitted"
    job_id: str = Field(min_length=1, max_length=256)
    cluster: str = Field(default="default", min_length=1, max_length=128)
    tenant: str = Field(default="default", max_length=256)
    user: str = Field(default="", max_length=256)
    priority: WireInt = Field(default=0, ge=-1_000_000, le=1_000_000)
    qos: QoS = "BE"
    cpu_milli: WireInt = Field(default=0, ge=0, le=MAX_CPU_MILLI)
    memory_mib: WireInt = Field(default=0, ge=0, le=MAX_MEMORY_MIB)
    num_gpu: WireInt = Field(default=0, ge=0, le=MAX_GPUS)
    gpu_milli: WireInt = Field(
        default=0,
        ge=0,
        le=1000,
        description="Per-GPU share in milli-GPU; < 1000 only with num_gpu == 1 (GPU sharing).",
    )
    gpu_models: list[str] = Field(default_factory=list, description="Allowed GPU models; empty = any.")
    gang_id: str | None = Field(default=None, max_length=256)
    gang_size: WireInt = Field(default=1, ge=1, le=MAX_GANG)
    # (found by review: "" or an id no job can have was accepted, and the child waited for it, then was rejected)
    dag_parents: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(default_factory=list,
                                                                                   max_length=10_000)
    app: str | None = Field(default=None, max_length=256)
    max_instances_per_node: WireInt | None = Field(default=None, ge=1, le=100_000)
    name: str = Field(default="", max_length=MAX_TEXT)
    command: str = Field(default="", max_length=MAX_TEXT)
    labels: dict[str, str] = Field(default_factory=dict)
    # (finite: NaN was refused as "less than or equal to 315360000", which did not say what was wrong; review)
    runtime_estimate_s: float | None = Field(default=None, ge=0, le=10 * 365 * 86400, allow_inf_nan=False)
    trace_duration_s: float | None = Field(
        default=None,
        ge=0,
        le=10 * 365 * 86400,
        allow_inf_nan=False,
        description="Recorded run time in the source trace. Simulated agents run the job "
        "this long; deployable policies must not read it (only oracle baselines do).",
    )

    @field_validator("gpu_models")
    @classmethod
    def _known_models(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - KNOWN_GPU_MODELS)
        if unknown:
            raise ValueError(f"unknown GPU model(s) {unknown}; known: {sorted(KNOWN_GPU_MODELS)}")
        return v

    @model_validator(mode="after")
    def _gpu_consistency(self) -> JobSubmitted:
        if self.num_gpu == 0 and self.gpu_milli not in (0, 1000):
            raise ValueError("gpu_milli set on a job that asks for no GPU")
        if self.num_gpu > 1 and self.gpu_milli not in (0, 1000):
            raise ValueError("fractional gpu_milli is only allowed with num_gpu == 1")
        if self.gang_size > 1 and not self.gang_id:
            raise ValueError("gang_size > 1 needs a gang_id")
        if self.job_id in self.dag_parents:
            raise ValueError(f"job {self.job_id!r} names itself among its dag_parents: it could never start")
        return self

    @property
    def gpu_demand_milli(self) -> int:
        """Milli-GPUs the job occupies: ``num_gpu × per-GPU share`` (full GPUs when unset)."""
        per_gpu = self.gpu_milli if 0 < self.gpu_milli <= 1000 else 1000
        return self.num_gpu * per_gpu

    @property
    def per_gpu_milli(self) -> int:
        return 0 if self.num_gpu == 0 else (self.gpu_milli if 0 < self.gpu_milli <= 1000 else 1000)


class NodeTelemetry(Event):
    """A node's capacity and state, from the inventory (replay) or from its agent."""

    kind: Literal["node_telemetry"] = "node_telemetry"
    node_id: str = Field(min_length=1, max_length=256)
    cluster: str = Field(default="default", min_length=1, max_length=128)
    source: Literal["inventory", "agent", "worker"] = Field(
        default="agent", description="inventory (replay), the node's agent, or the worker marking a node "
        "whose agent fell silent unhealthy (its last report's state otherwise)")
    cpu_milli: WireInt = Field(ge=0, le=MAX_CPU_MILLI)
    memory_mib: WireInt = Field(ge=0, le=MAX_MEMORY_MIB)
    num_gpu: WireInt = Field(default=0, ge=0, le=MAX_GPUS)
    gpu_model: str | None = None
    cpu_alloc_milli: WireInt = Field(default=0, ge=0, le=MAX_CPU_MILLI)
    memory_alloc_mib: WireInt = Field(default=0, ge=0, le=MAX_MEMORY_MIB)
    gpu_alloc_milli: list[WireInt] = Field(default_factory=list, description="Allocated milli per GPU.")
    cpu_util: float = Field(default=0.0, ge=0.0, le=1.0, description="Measured, 0..1.")
    gpu_util: float = Field(default=0.0, ge=0.0, le=1.0, description="Measured, 0..1.")
    healthy: bool = True
    topology: dict[str, str] = Field(default_factory=dict, description="rack, zone, …")

    @field_validator("gpu_model")
    @classmethod
    def _known_model(cls, v: str | None) -> str | None:
        if v is not None and v not in KNOWN_GPU_MODELS:
            raise ValueError(f"unknown GPU model {v!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> NodeTelemetry:
        if self.num_gpu > 0 and not self.gpu_model:
            raise ValueError("a node with GPUs needs a gpu_model")
        if self.gpu_alloc_milli and len(self.gpu_alloc_milli) != self.num_gpu:
            raise ValueError("gpu_alloc_milli must have one entry per GPU")
        if any(not 0 <= m <= 1000 for m in self.gpu_alloc_milli):
            raise ValueError("gpu_alloc_milli entries must be within 0..1000")
        if self.cpu_alloc_milli > self.cpu_milli or self.memory_alloc_mib > self.memory_mib:
            raise ValueError("allocation exceeds capacity")
        return self


LifecycleState = Literal["started", "finished", "failed", "preempted", "timed_out", "rejected"]


class JobLifecycle(Event):
    """What happened to a placed job. ``started``/``finished``/``failed``/``preempted`` come
    from agents; ``timed_out`` (placement never confirmed) and ``rejected`` (given up,
    with a reason) from the worker."""

    kind: Literal["job_lifecycle"] = "job_lifecycle"
    job_id: str = Field(min_length=1, max_length=256)
    cluster: str = Field(default="default", min_length=1, max_length=128)
    state: LifecycleState
    attempt: WireInt = Field(default=0, ge=0, le=MAX_ATTEMPT)
    decision_id: str | None = Field(default=None, description="The decision_id of the command the report is about: "
                                    "required in every state but the worker's 'rejected' notice.")  # fmt: skip
    node_id: str | None = None
    gpu_indices: list[Annotated[WireInt, Field(ge=0, le=MAX_GPUS)]] = Field(
        default_factory=list, description="The GPUs the placement holds (agents report them)."
    )
    exit_code: ExitCode | None = None
    reason: str = Field(default="", max_length=MAX_TEXT)
    log_tail: str = Field(default="", max_length=MAX_TEXT)

    @model_validator(mode="after")
    def _names_its_decision(self) -> JobLifecycle:
        # a report about a placement must say which one (the command's decision_id): without it the
        # worker cannot tell it from a stale one, and it was taken for one and ignored, the job re-placed
        # at every confirmation timeout with nothing said
        if self.state != "rejected" and not self.decision_id:
            raise ValueError(f"a {self.state!r} report needs the decision_id of the command it is about")
        return self


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    node_id: str
    score: float


class DecisionRecord(Event):
    """The worker's account of one decision: a placement or a rejection. ``event_id`` equals
    ``decision_id`` so replays of the same decision collapse in the archive."""

    kind: Literal["decision"] = "decision"
    decision_id: str
    job_id: str
    cluster: str = "default"
    attempt: int = Field(default=0, ge=0, le=MAX_ATTEMPT)
    outcome: Literal["placed", "rejected", "unschedulable"] = Field(
        description="placed; rejected (given up, with a reason); unschedulable (still pending: "
        "why no node fits right now; recorded when the reason changes)"
    )
    node_id: str | None = None
    gpu_indices: list[Annotated[int, Field(ge=0, le=MAX_GPUS)]] = Field(default_factory=list)
    policy: str
    model_version: str = ""
    candidates: list[Candidate] = Field(default_factory=list, description="Top-scored nodes.")
    feasible_nodes: int = Field(default=0, ge=0, le=MAX_UINT32)
    predicted_duration_s: float | None = Field(default=None, allow_inf_nan=False)
    predicted_cost: float | None = Field(default=None, allow_inf_nan=False)
    predicted_run_time_s: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="The learned cost estimator's expected run time of the job on the chosen node, s "
        "(trained on recorded run times at nominal node speed).",
    )
    latency_ms: float = Field(ge=0, allow_inf_nan=False, description="Job submit (or tick) to command, ms.")
    step_compute_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    submit_time: AwareDatetime | None = None
    reason: str = ""
    # what the job holds once placed (the worker's reservation)
    cpu_milli: int = Field(default=0, ge=0, le=MAX_CPU_MILLI)
    memory_mib: int = Field(default=0, ge=0, le=MAX_MEMORY_MIB)
    gpu_milli_per_gpu: int = Field(default=0, ge=0, le=1000)
    trace_duration_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    fallback: bool = Field(default=False, description="True when the configured scorer failed.")
    step_id: str = Field(default="", max_length=256, description="The scheduling step that decided.")
    lifecycle_through: int | None = Field(
        default=None, ge=0, le=2**63 - 1,
        description="The state the step saw: the offset after the last jobs.lifecycle event of the cluster's "
        "partition the worker had handled when the step took its snapshot (the reports below it had freed "
        "their resources; None: not known).",
    )

    @field_validator("submit_time")
    @classmethod
    def _submit_time(cls, v: datetime | None) -> datetime | None:
        return None if v is None else archived_time(v, "submit_time")


#: a command's fields that its agent's reports echo (:class:`JobLifecycle`): held to the same bounds, so
#: a command whose report could not be built is refused as malformed (dead-lettered by the agents)
CommandDecisionId = Annotated[str, Field(min_length=1)]
CommandJobId = Annotated[str, Field(min_length=1, max_length=256)]
CommandReason = Annotated[str, Field(max_length=MAX_TEXT)]
CommandCluster = Annotated[str, Field(min_length=1, max_length=128)]


class PlacementCommand(Event):
    kind: Literal["place"] = "place"
    decision_id: CommandDecisionId
    job_id: CommandJobId
    cluster: CommandCluster = "default"
    attempt: int = Field(default=0, ge=0, le=MAX_ATTEMPT)
    node_id: str
    gpu_indices: list[Annotated[int, Field(ge=0, le=MAX_GPUS)]] = Field(default_factory=list)
    cpu_milli: int = Field(default=0, ge=0, le=MAX_CPU_MILLI)
    memory_mib: int = Field(default=0, ge=0, le=MAX_MEMORY_MIB)
    gpu_milli_per_gpu: int = Field(default=0, ge=0, le=1000)
    policy: str
    model_version: str = ""
    reason: str = ""
    trace_duration_s: float | None = None


class PreemptCommand(Event):
    kind: Literal["preempt"] = "preempt"
    decision_id: CommandDecisionId
    job_id: CommandJobId
    cluster: CommandCluster = "default"
    node_id: str
    reason: CommandReason
    target_decision_id: CommandDecisionId | None = Field(
        default=None, description="End only this placement of the job (e.g. a superseded attempt)."
    )


class IsolateNodeCommand(Event):
    kind: Literal["isolate_node"] = "isolate_node"
    decision_id: str
    cluster: str = "default"
    node_id: str
    reason: str


class RestartFromCheckpointCommand(Event):
    kind: Literal["restart_from_checkpoint"] = "restart_from_checkpoint"
    decision_id: str
    job_id: str
    cluster: str = "default"
    node_id: str
    checkpoint_uri: str
    reason: str


Command = Annotated[
    PlacementCommand | PreemptCommand | IsolateNodeCommand | RestartFromCheckpointCommand,
    Field(discriminator="kind"),
]


MAX_DEADLETTER_KEY = 1024  # bytes of a message's key a dead letter keeps (as its Kafka key and in its value)


def name_some(names: Sequence[str], sep: str = ", ", most: int = 5) -> str:
    """``names`` joined, the first ``most`` and how many more: a reason that names a group stays short
    (a gang's missing members, a job's DAG parents)."""
    return sep.join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


#: the start of a dead letter's reason for an event its handler failed on (the worker applies it again:
#: the archive's ``*_accepted`` views and a restore count it neither refused nor accepted)
INTERNAL_ERROR = "internal error"

#: how a decision's policy is named when its fallback heuristic decided (the model did not answer);
#: the archive's SQL groups by the same label (``storage.queries._common.DECIDED_BY``)
FALLBACK_SUFFIX = " (fallback)"


def node_lost_reason(node_id: str, how: str, unhealthy_s: float, grace_s: float) -> str:
    """The reason of the worker's own ``preempted`` of a run on a node it takes for lost, and of the fence
    sent with it (``streams/lost_nodes.py``); an agent's answer to that fence echoes it. Reconciliation
    tells the worker's report from an agent's by it (:data:`NODE_LOST_REASON_RE`)."""
    return f"node {node_id} {how} unhealthy for {unhealthy_s:.0f}s (SEMSCHED_NODE_LOST={grace_s:g})"


#: the reason a restarted agents process reports each run its predecessor left behind ``preempted``
#: (``ops/agents/recovery.py``): not when the run ended (the process that ran it died before), so
#: reconciliation's ran-twice check does not take it for the run's end
AGENT_RESTART_LOST_REASON = "agent restarted: the run in progress was lost"

#: a regular expression (RE2 and Python alike) that matches :func:`node_lost_reason`'s text
NODE_LOST_REASON_RE = r"^node .+ unhealthy for [0-9]+s \(SEMSCHED_NODE_LOST="


def decided_by(policy: str, fallback: bool) -> str:
    """Who chose a placement: ``policy``, or its fallback heuristic (``<policy> (fallback)``)."""
    return policy + FALLBACK_SUFFIX if fallback else policy


def cut_text(text: str, limit: int) -> str:
    """``text``, or its start and how much was cut, within ``limit`` characters."""
    if len(text) <= limit:
        return text
    note = ""
    for _ in range(2):  # (the note's length depends on the count it gives)
        kept = max(0, limit - len(note))
        note = f" … ({len(text) - kept:,} characters cut)"
    return text[: max(0, limit - len(note))] + note


class DeadLetter(Event):
    kind: Literal["deadletter"] = "deadletter"
    topic: str
    partition: int = Field(default=-1, ge=-1, le=2**31 - 1)
    offset: int = Field(default=-1, ge=-1, le=2**63 - 1)  # (the archive's Int64: found by review)
    key: str | None = None
    original_b64: str = Field(description="The original message bytes, base64.")
    original_size: int = Field(default=0, ge=0, le=MAX_UINT32)
    reason: str

    @field_validator("original_b64")
    @classmethod
    def _base64(cls, v: str) -> str:
        try:
            base64.b64decode(v, validate=True)
        except ValueError as e:
            raise ValueError(f"original_b64 is not base64: {e}") from e
        return v

    @classmethod
    def of(cls, raw: bytes, reason: str, *, topic: str, partition: int = -1, offset: int = -1,
           key: bytes | None = None, keep: int = 64 * 1024, timestamp_ms: int | None = None) -> DeadLetter:
        """The dead letter of ``raw`` (its first ``keep`` bytes); the reason and the key are cut to
        :data:`MAX_TEXT` and :data:`MAX_DEADLETTER_KEY` bytes (found by review: a long key, or a reason
        quoting a long value, made a dead letter the producer refused for its size, for ever).

        The dead letter of a record read at ``topic[partition]@offset`` has an id derived from that place
        and, given the record's Kafka timestamp, that time: a record dead-lettered again (read again after a
        crash or a rebalance, before its offset was committed) is the same event, one row of the archive's
        ``deadletter`` table (it is ordered by topic, time and id). Before, each got a new id and the time
        of refusal, and the archive counted it twice."""
        identity: dict[str, Any] = {}
        if partition >= 0 and offset >= 0:
            identity["event_id"] = derived_event_id(f"{topic}:{partition}:{offset}", "deadletter")
            if timestamp_ms is not None and timestamp_ms >= 0:  # (-1: the record has none)
                with contextlib.suppress(ValueError):  # out of the archive's range: the time of refusal
                    identity["event_time"] = record_time(timestamp_ms)
        return cls(
            topic=topic, partition=partition, offset=offset,
            key=None if key is None else cut_text(key.decode("utf-8", "replace"), MAX_DEADLETTER_KEY),
            original_b64=base64.b64encode(raw[:keep]).decode(), original_size=len(raw),
            reason=cut_text(reason, MAX_TEXT), **identity,
        )  # fmt: skip

    def original(self) -> bytes:
        return base64.b64decode(self.original_b64)


TOPIC_EVENTS: dict[str, object] = {
    "jobs.submitted": JobSubmitted,
    "nodes.telemetry": NodeTelemetry,
    "jobs.lifecycle": JobLifecycle,
    "decisions": DecisionRecord,
    "actions": Command,
    "deadletter": DeadLetter,
}

_ADAPTERS: dict[str, TypeAdapter] = {t: TypeAdapter(m) for t, m in TOPIC_EVENTS.items()}


def decode(topic: str, raw: bytes) -> Event:
    """Parse one wire message of ``topic`` (un-prefixed name). Raises ``ValueError`` with a
    human-readable reason on anything malformed, a field of the wrong JSON type included."""
    from pydantic import ValidationError

    try:  # strict: a mistyped field ("1000" for an integer, true for a count) is refused, not coerced
        return _ADAPTERS[topic].validate_json(raw, strict=True)
    except ValidationError as e:
        raise ValueError(format_validation_error(e)) from None


def format_validation_error(e: Exception) -> str:
    from pydantic import ValidationError

    if not isinstance(e, ValidationError):
        return str(e)
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "")).removeprefix("Value error, ")  # a validator's own words, without pydantic's tag
        if err.get("loc", ())[-1:] == ("schema_version",) and err.get("type") == "literal_error":
            # (found by review: "Input should be 1" did not tell a newer producer what to do)
            msg = (f"schema_version {err.get('input')!r} is not one this worker reads (it reads {SCHEMA_VERSION}): "
                   f"publish version {SCHEMA_VERSION}, or upgrade the worker")  # fmt: skip
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = "" if e.error_count() <= 5 else f" (+{e.error_count() - 5} more)"
    return "; ".join(parts) + more


def json_schemas() -> dict[str, dict]:
    """JSON Schema per topic, for producers."""
    return {topic: _ADAPTERS[topic].json_schema() for topic in TOPIC_EVENTS}
