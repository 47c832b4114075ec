"""Events → column-wise batches, one Arrow schema per archive table.

``to_arrow(table, events, positions)`` builds a ``pyarrow.Table`` column by column (one
list comprehension per column over the batch; never row tuples). The Arrow types match
the ClickHouse columns of ``storage/migrations`` so the insert needs no casts.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from scheduling.events import (
    DeadLetter,
    DecisionRecord,
    Event,
    IsolateNodeCommand,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    PlacementCommand,
    PreemptCommand,
    RestartFromCheckpointCommand,
)

TS = pa.timestamp("ms", tz="UTC")
STR = pa.string()
MAP = pa.map_(pa.string(), pa.string())
CANDIDATES = pa.list_(pa.struct([("node_id", pa.string()), ("score", pa.float64())]))

#: topic (un-prefixed) → archive table
TOPIC_TABLES: dict[str, str] = {
    "jobs.submitted": "jobs_submitted",
    "nodes.telemetry": "nodes_telemetry",
    "jobs.lifecycle": "jobs_lifecycle",
    "decisions": "decisions",
    "actions": "actions",
    "deadletter": "deadletter",
}
TABLES: tuple[str, ...] = tuple(TOPIC_TABLES.values())

#: the event classes each table accepts
TABLE_EVENTS: dict[str, tuple[type[Event], ...]] = {
    "jobs_submitted": (JobSubmitted,),
    "nodes_telemetry": (NodeTelemetry,),
    "jobs_lifecycle": (JobLifecycle,),
    "decisions": (DecisionRecord,),
    "actions": (PlacementCommand, PreemptCommand, IsolateNodeCommand, RestartFromCheckpointCommand),
    "deadletter": (DeadLetter,),
}

Position = tuple[int, int]
Getter = Callable[[Any], Any]


def _attr(name: str, default: Any = None) -> Getter:
    return lambda e: getattr(e, name, default)


# (column, arrow type, getter) per table; the common head and tail are added below.
_SPECIFIC: dict[str, list[tuple[str, pa.DataType, Getter]]] = {
    "jobs_submitted": [
        ("job_id", STR, _attr("job_id")),
        ("cluster", STR, _attr("cluster")),
        ("tenant", STR, _attr("tenant")),
        ("user", STR, _attr("user")),
        ("priority", pa.int32(), _attr("priority")),
        ("qos", STR, _attr("qos")),
        ("cpu_milli", pa.uint32(), _attr("cpu_milli")),
        ("memory_mib", pa.uint32(), _attr("memory_mib")),
        ("num_gpu", pa.uint8(), _attr("num_gpu")),
        ("gpu_milli", pa.uint16(), _attr("gpu_milli")),
        ("gpu_models", pa.list_(STR), _attr("gpu_models")),
        ("gang_id", STR, _attr("gang_id")),
        ("gang_size", pa.uint16(), _attr("gang_size")),
        ("dag_parents", pa.list_(STR), _attr("dag_parents")),
        ("app", STR, _attr("app")),
        ("max_instances_per_node", pa.uint32(), _attr("max_instances_per_node")),
        ("name", STR, _attr("name")),
        ("command", STR, _attr("command")),
        ("labels", MAP, lambda e: list(e.labels.items())),
        ("runtime_estimate_s", pa.float64(), _attr("runtime_estimate_s")),
        ("trace_duration_s", pa.float64(), _attr("trace_duration_s")),
    ],
    "nodes_telemetry": [
        ("node_id", STR, _attr("node_id")),
        ("cluster", STR, _attr("cluster")),
        ("source", STR, _attr("source")),
        ("cpu_milli", pa.uint32(), _attr("cpu_milli")),
        ("memory_mib", pa.uint32(), _attr("memory_mib")),
        ("num_gpu", pa.uint8(), _attr("num_gpu")),
        ("gpu_model", STR, _attr("gpu_model")),
        ("cpu_alloc_milli", pa.uint32(), _attr("cpu_alloc_milli")),
        ("memory_alloc_mib", pa.uint32(), _attr("memory_alloc_mib")),
        ("gpu_alloc_milli", pa.list_(pa.uint16()), _attr("gpu_alloc_milli")),
        ("cpu_util", pa.float32(), _attr("cpu_util")),
        ("gpu_util", pa.float32(), _attr("gpu_util")),
        ("healthy", pa.bool_(), _attr("healthy")),
        ("topology", MAP, lambda e: list(e.topology.items())),
    ],
    "jobs_lifecycle": [
        ("job_id", STR, _attr("job_id")),
        ("cluster", STR, _attr("cluster")),
        ("state", STR, _attr("state")),
        ("attempt", pa.uint16(), _attr("attempt")),
        ("decision_id", STR, _attr("decision_id")),
        ("node_id", STR, _attr("node_id")),
        ("gpu_indices", pa.list_(pa.uint8()), _attr("gpu_indices", [])),
        ("exit_code", pa.int32(), _attr("exit_code")),
        ("reason", STR, _attr("reason")),
        ("log_tail", STR, _attr("log_tail")),
    ],
    "decisions": [
        ("decision_id", STR, _attr("decision_id")),
        ("job_id", STR, _attr("job_id")),
        ("cluster", STR, _attr("cluster")),
        ("attempt", pa.uint16(), _attr("attempt")),
        ("outcome", STR, _attr("outcome")),
        ("node_id", STR, _attr("node_id")),
        ("gpu_indices", pa.list_(pa.uint8()), _attr("gpu_indices")),
        ("policy", STR, _attr("policy")),
        ("model_version", STR, _attr("model_version")),
        (
            "candidates",
            CANDIDATES,
            lambda e: [{"node_id": c.node_id, "score": c.score} for c in e.candidates],
        ),
        ("feasible_nodes", pa.uint32(), _attr("feasible_nodes")),
        ("predicted_duration_s", pa.float64(), _attr("predicted_duration_s")),
        ("predicted_cost", pa.float64(), _attr("predicted_cost")),
        ("predicted_run_time_s", pa.float64(), _attr("predicted_run_time_s")),
        ("latency_ms", pa.float64(), _attr("latency_ms")),
        ("step_compute_ms", pa.float64(), _attr("step_compute_ms")),
        ("submit_time", TS, _attr("submit_time")),
        ("reason", STR, _attr("reason")),
        ("cpu_milli", pa.uint32(), _attr("cpu_milli")),
        ("memory_mib", pa.uint32(), _attr("memory_mib")),
        ("gpu_milli_per_gpu", pa.uint16(), _attr("gpu_milli_per_gpu")),
        ("trace_duration_s", pa.float64(), _attr("trace_duration_s")),
        ("fallback", pa.bool_(), _attr("fallback")),
        ("step_id", STR, _attr("step_id")),
        ("lifecycle_through", pa.uint64(), _attr("lifecycle_through")),
    ],
    "actions": [
        ("kind", STR, _attr("kind")),
        ("decision_id", STR, _attr("decision_id")),
        ("cluster", STR, _attr("cluster")),
        ("node_id", STR, _attr("node_id")),
        ("reason", STR, _attr("reason", "")),
        ("job_id", STR, _attr("job_id")),
        ("attempt", pa.uint16(), _attr("attempt")),
        ("gpu_indices", pa.list_(pa.uint8()), _attr("gpu_indices", [])),
        ("cpu_milli", pa.uint32(), _attr("cpu_milli")),
        ("memory_mib", pa.uint32(), _attr("memory_mib")),
        ("gpu_milli_per_gpu", pa.uint16(), _attr("gpu_milli_per_gpu")),
        ("policy", STR, _attr("policy")),
        ("model_version", STR, _attr("model_version")),
        ("trace_duration_s", pa.float64(), _attr("trace_duration_s")),
        ("checkpoint_uri", STR, _attr("checkpoint_uri")),
        ("target_decision_id", STR, _attr("target_decision_id")),
    ],
    "deadletter": [
        ("topic", STR, _attr("topic")),
        ("topic_partition", pa.int32(), _attr("partition")),
        ("topic_offset", pa.int64(), _attr("offset")),
        ("message_key", STR, _attr("key")),
        ("original", pa.binary(), lambda e: base64.b64decode(e.original_b64)),
        ("original_size", pa.uint32(), _attr("original_size")),
        ("reason", STR, _attr("reason")),
    ],
}

_HEAD: list[tuple[str, pa.DataType, Getter]] = [
    ("event_id", STR, _attr("event_id")),
    ("event_time", TS, _attr("event_time")),
    ("schema_version", pa.uint8(), _attr("schema_version")),
]

#: the Arrow schema of each table's batches (column order as inserted)
SCHEMAS: dict[str, pa.Schema] = {
    t: pa.schema(
        [pa.field(n, typ) for n, typ, _ in (*_HEAD, *cols)]
        + [pa.field("kafka_partition", pa.int32()), pa.field("kafka_offset", pa.int64()),
           pa.field("archived_at", TS)]
    )
    for t, cols in _SPECIFIC.items()
}  # fmt: skip


def table_for_topic(topic: str) -> str:
    """The archive table of an un-prefixed topic name."""
    return TOPIC_TABLES[topic]


def table_for_event(event: Event) -> str:
    """The archive table an event belongs in (by its class)."""
    for table, classes in TABLE_EVENTS.items():
        if isinstance(event, classes):
            return table
    raise TypeError(f"no archive table for {type(event).__name__}")


def columns(
    table: str,
    events: Sequence[Event],
    positions: Sequence[Position] | None = None,
    archived_at: datetime | None = None,
) -> dict[str, list[Any]]:
    """The batch as ``{column: values}`` (Python lists, one per column)."""
    if table not in _SPECIFIC:
        raise KeyError(f"unknown archive table {table!r}; known: {sorted(_SPECIFIC)}")
    allowed = TABLE_EVENTS[table]
    for e in events:
        if not isinstance(e, allowed):
            raise TypeError(f"{type(e).__name__} does not belong in table {table}")
    if positions is None:
        positions = [(-1, -1)] * len(events)
    if len(positions) != len(events):
        raise ValueError(f"{len(events)} events but {len(positions)} positions")
    out: dict[str, list[Any]] = {
        name: [get(e) for e in events] for name, _, get in (*_HEAD, *_SPECIFIC[table])
    }
    out["kafka_partition"] = [p for p, _ in positions]
    out["kafka_offset"] = [o for _, o in positions]
    out["archived_at"] = [archived_at or datetime.now(UTC)] * len(events)
    return out


def to_arrow(
    table: str,
    events: Sequence[Event],
    positions: Sequence[Position] | None = None,
    archived_at: datetime | None = None,
) -> pa.Table:
    """The batch as a ``pyarrow.Table`` with :data:`SCHEMAS` ``[table]``."""
    cols = columns(table, events, positions, archived_at)
    schema = SCHEMAS[table]
    return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in schema], schema=schema)
