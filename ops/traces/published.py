"""A trace's event as a replay publishes it: re-stamped with the moment it is sent, and a job
without an id of the trace's given one derived from the trace file and the job, so a replay run
again publishes each job under the id it had (:mod:`ops.replay`). The jsonl loader measures an
event's size on the wire this way too: the stamp is longer than a time without fractions and a
random id (found by review: an event within 14 bytes of the worker's limit passed the loader and
was dead-lettered once published)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from ops.traces.base import TraceLoader
from scheduling.events import JobSubmitted, NodeTelemetry

E = TypeVar("E", JobSubmitted, NodeTelemetry)


def published(event: E, source: str | None = None, now: datetime | None = None) -> E:
    """``event`` as published at ``now`` (default: now); with ``source`` (:func:`replay_source`), a job
    without an id of the trace's gets :func:`replay_event_id`."""
    update: dict[str, object] = {"event_time": now or datetime.now(UTC)}
    if source is not None and isinstance(event, JobSubmitted) and "event_id" not in event.model_fields_set:
        update["event_id"] = replay_event_id(source, event)
    return event.model_copy(update=update)


def replay_source(loader: TraceLoader) -> str:
    """What a replay's derived event ids are keyed by: the file the trace's jobs are read from, resolved,
    however it was named (found by review: the file and its directory gave two ids, and a replay resumed
    through the other dead-lettered every job it had sent)."""
    return str(Path(loader.jobs_file).resolve())


def replay_event_id(source: str, job: JobSubmitted) -> str:
    """The id of ``job`` replayed from the trace file ``source``: the same in every run of that file, and
    another when the job's request changed (found by review: a file written again with a job id reused for
    another request took the new one for a redelivery of the old, accepted, and the job never ran; now the
    worker dead-letters it as a reused job id)."""
    request = job.model_dump_json(exclude={"event_time", "event_id"})
    return "replay-" + hashlib.sha1(f"{source}\0{job.cluster}\0{job.job_id}\0{request}".encode()).hexdigest()[:32]


#: a publication time as long as any on the wire (its microseconds are not zero): for size checks
LONGEST_STAMP = datetime(2000, 1, 1, 0, 0, 0, 100_000, tzinfo=UTC)
