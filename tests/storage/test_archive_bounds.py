"""Every event the models accept can be archived (found by review: a lifecycle event with exit
code 4294967295 or attempt 70,000, a decision with a negative attempt, a dead letter whose
original was not base64, passed validation and then failed the Arrow conversion, and the
archiver retried that batch forever, every topic stalled behind it).

Each integer field of one event of each kind is tried at the edges of the integer types the
archive uses; whatever the model accepts must convert to its table's row, and what it refuses
is refused at ingest, where the worker dead-letters it with its reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from scheduling.events import DeadLetter, Event, JobLifecycle, JobSubmitted
from storage.client import ArchiveClient
from storage.rows import table_for_event, to_arrow
from storage.writer import ArchiveWriter
from tests.storage.test_roundtrip import EVENTS

EDGES = [-(2**63), -(2**31) - 1, -(2**31), -1, 0, 255, 256, 1000, 1001, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1,
         2**32, 2**63 - 1]  # fmt: skip


def variants(event: Event):
    """(field, value, the event with it, or the ValidationError) for each integer field and edge."""
    data = event.model_dump()
    for name, value in data.items():
        if isinstance(value, bool):
            continue
        for edge in EDGES:
            if isinstance(value, int) or (value is None and name == "exit_code"):
                trial = edge
            elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
                trial = [edge] * len(value)
            else:
                break
            try:
                yield name, trial, type(event).model_validate({**data, name: trial})
            except ValidationError as e:
                yield name, trial, e


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_integer_the_models_accept_fits_its_archive_column(event: Event) -> None:
    table, tried, refused = table_for_event(event), 0, 0
    for name, value, got in variants(event):
        tried += 1
        if isinstance(got, ValidationError):
            refused += 1
            continue
        try:
            to_arrow(table, [got], [(0, 0)])
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{type(event).__name__}.{name} = {value} is accepted but cannot be archived: {e}")
    assert tried and refused  # (the edges reach past every field's range)


def test_an_unsigned_32_bit_exit_code_is_read_as_the_signed_code_it_is() -> None:
    """4294967295 is -1 as a 32-bit exit status (a Windows agent reports it so): a real failure report."""
    e = JobLifecycle(job_id="j", decision_id="d", state="failed", exit_code=4294967295)
    assert e.exit_code == -1
    assert JobLifecycle(job_id="j", decision_id="d", state="failed", exit_code=2**31).exit_code == -(2**31)
    with pytest.raises(ValidationError):
        JobLifecycle(job_id="j", decision_id="d", state="failed", exit_code=2**32)


def test_a_dead_letter_needs_its_original_in_base64() -> None:
    with pytest.raises(ValidationError, match="base64"):
        DeadLetter(topic="jobs.submitted", original_b64="not base64!", reason="x")
    assert DeadLetter.of(b"\xff\x00", "bad", topic="jobs.submitted").original() == b"\xff\x00"


@pytest.mark.parametrize("when", [datetime(1899, 12, 31, 23, 59, tzinfo=UTC), datetime(2300, 1, 1, tzinfo=UTC)])
def test_an_event_time_the_archive_cannot_hold_is_refused(when: datetime) -> None:
    with pytest.raises(ValidationError, match="event_time"):
        JobSubmitted(job_id="j", event_time=when)


def test_the_archive_keeps_the_earliest_and_latest_event_times_it_accepts_in_one_batch(client: ArchiveClient) -> None:
    """Both ends of the accepted range, and a batch whose times span more months than ClickHouse's
    default limit of partitions per insert (100; the tables are partitioned by month)."""
    first, last = datetime(1900, 1, 1, tzinfo=UTC), datetime(2299, 12, 31, 23, 59, 59, tzinfo=UTC)
    monthly = [first + timedelta(days=31 * i) for i in range(150)]
    events = [JobSubmitted(job_id=f"j{i}", event_id=f"e{i}", event_time=t) for i, t in enumerate([*monthly, last])]
    ArchiveWriter(client).write("jobs_submitted", events, [(0, i) for i in range(len(events))])
    got = client.query_arrow("SELECT min(event_time) AS lo, max(event_time) AS hi, count() AS n FROM jobs_submitted FINAL")
    row = {k: v[0] for k, v in got.to_pydict().items()}
    assert (row["lo"], row["hi"], row["n"]) == (first, last, len(events))


def test_a_row_the_archive_cannot_hold_is_dead_lettered_and_the_rest_of_its_batch_written(client: ArchiveClient) -> None:
    """Should an event the models accepted still not convert (a gap in the bounds above), it goes to
    the deadletter table with its reason and the rest of its batch is written, once however often."""
    import json

    good = [JobLifecycle(job_id=f"j{i}", event_id=f"l{i}", decision_id="d", state="started") for i in range(2)]
    bad = JobLifecycle.model_construct(**{**good[0].model_dump(), "event_id": "bad", "attempt": 70_000})
    writer = ArchiveWriter(client)
    for _ in range(2):  # written again (a redelivery after a crash)
        assert writer.write("jobs_lifecycle", [good[0], bad, good[1]], [(1, 10), (1, 11), (1, 12)]) == 3
    kept = client.query_arrow("SELECT event_id FROM jobs_lifecycle FINAL ORDER BY event_id").to_pydict()["event_id"]
    assert kept == [b"l0", b"l1"]  # (String columns come back as bytes)
    letters = client.query_arrow("SELECT topic, topic_partition, topic_offset, reason, original FROM deadletter FINAL")
    [row] = [dict(zip(letters.column_names, r, strict=True)) for r in zip(*letters.to_pydict().values(), strict=True)]
    assert (row["topic"], row["topic_partition"], row["topic_offset"]) == (b"jobs.lifecycle", 1, 11), row
    assert b"cannot hold it in jobs_lifecycle" in row["reason"] and json.loads(row["original"])["attempt"] == 70_000
    assert writer.unarchivable == 2


def test_an_unarchivable_events_dead_letter_keeps_the_whole_event(client: ArchiveClient) -> None:
    """Found by review: the writer's dead letter kept the first 64 KiB of the event, though it goes to the
    archive, not through Kafka."""
    import json

    good = JobSubmitted(job_id="j0", event_id="s0", labels={"notes": "x" * 200_000})  # (labels are unbounded)
    bad = JobSubmitted.model_construct(**{**good.model_dump(), "event_id": "bad", "gang_size": 70_000})
    ArchiveWriter(client).write("jobs_submitted", [bad], [(1, 11)])
    [(original, size)] = client.query_rows("SELECT original, original_size FROM deadletter FINAL")[1]
    assert len(original) == size > 200_000 and json.loads(original)["labels"]["notes"] == "x" * 200_000
