"""streams/admission.py: what the worker (and so the archive) accepts, on the message alone."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduling.events import DeadLetter, JobSubmitted, partition_for
from streams.admission import admit
from streams.settings import Settings

S = Settings(partitions=4, max_message_bytes=2048)


def test_an_ingested_event_is_refused_for_its_size_or_its_partition_with_the_reason() -> None:
    ok = JobSubmitted(job_id="a", cluster="c1")
    home = partition_for("c1", 4)
    assert admit(ok.to_bytes(), "jobs.submitted", home, S) == ok
    big = JobSubmitted(job_id="b", cluster="c1", labels={"x": "y" * 4000}).to_bytes()
    assert "exceeds the 2048-byte limit" in admit(big, "jobs.submitted", home, S)  # type: ignore[operator]
    assert "belong on partition" in admit(ok.to_bytes(), "jobs.submitted", (home + 1) % 4, S)  # type: ignore[operator]
    assert admit(None, "jobs.submitted", home, S) == "empty message (null value)"
    assert str(admit(b'{"kind": "job_submitted", "job_id": 7}', "jobs.submitted", home, S)).startswith(
        "invalid jobs.submitted event: job_id")


def test_a_dead_letter_of_a_large_message_is_admitted_whatever_the_size_limit() -> None:
    dl = DeadLetter.of(b"z" * 5000, "too large", topic="jobs.submitted")
    assert len(dl.to_bytes()) > S.max_message_bytes
    assert admit(dl.to_bytes(), "deadletter", 0, S) == dl


def test_an_event_without_id_or_time_takes_them_from_its_place_on_the_topic() -> None:
    """Each reader drew its own uuid and clock for them: the worker's dead-letter reason named
    one id, the archive held another, and a restore a third."""
    home = partition_for("default", 4)
    bare = b'{"kind": "job_submitted", "job_id": "x"}'
    first = admit(bare, "jobs.submitted", home, S, offset=41, timestamp_ms=1_700_000_000_123)
    again = admit(bare, "jobs.submitted", home, S, offset=41, timestamp_ms=1_700_000_000_123)  # another reader
    resent = admit(bare, "jobs.submitted", home, S, offset=42, timestamp_ms=1_700_000_005_000)  # sent again
    assert isinstance(first, JobSubmitted) and isinstance(resent, JobSubmitted)
    assert first == again and first.event_id != resent.event_id
    assert first.event_time == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    given = JobSubmitted(job_id="y", event_id="mine", event_time=datetime(2026, 1, 1, tzinfo=UTC))
    assert admit(given.to_bytes(), "jobs.submitted", home, S, offset=7, timestamp_ms=1) == given  # kept as sent


def test_a_time_that_cannot_be_converted_to_utc_is_refused_with_the_reason_not_raised() -> None:
    """RFC 3339 allows these; converting them to UTC overflows (found by review: OverflowError escaped the
    schema check and stopped the worker's agent for the topic, and the archiver, with no dead letter)."""
    p = partition_for("default", S.partitions)
    for when in ("9999-12-31T23:00:00-23:59", "0001-01-01T00:00:00+01:00"):
        got = admit(f'{{"job_id": "j", "event_time": "{when}"}}'.encode(), "jobs.submitted", p, S, offset=1)
        assert isinstance(got, str) and "cannot be converted to UTC" in got, got
    # a producer that left event_time out gets the record's timestamp: checked as strictly
    for stamp in (10**15, 10_500_000_000_000):  # past year 9999; past what the archive holds (2299)
        got = admit(b'{"job_id": "j"}', "jobs.submitted", p, S, offset=1, timestamp_ms=stamp)
        assert isinstance(got, str) and "the record's timestamp" in got, got
    record = ('{"decision_id": "d", "job_id": "j", "outcome": "placed", "policy": "p", "latency_ms": 1, '
              '"submit_time": "9999-12-31T23:00:00-23:59"}')
    got = admit(record.encode(), "decisions", p, S, offset=1)
    assert isinstance(got, str) and "submit_time" in got, got
