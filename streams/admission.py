"""Admission: what the worker accepts from an input topic, on the message alone.

A message is refused — dead-lettered by the worker with the reason — when it is empty, over
``settings.max_message_bytes``, not a valid event of its topic, or on another partition than its
cluster's. The archiver applies the same check, so an event the worker refused on these grounds
is in the ``deadletter`` table only, never in an event table as if it had been accepted (refusals
that depend on the worker's state, such as a job id submitted twice, are its alone).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from scheduling.events import Event, decode, partition_for, with_record_identity
from streams.settings import Settings

#: the topics the worker consumes; the others (``actions``, ``deadletter``) are the worker's and the
#: agents' own output, checked for decoding only (a dead letter of a large message is archived whatever
#: the size limit)
INGESTED = frozenset({"jobs.submitted", "nodes.telemetry", "jobs.lifecycle", "decisions"})


def admit(raw: bytes | None, topic: str, partition: int, settings: Settings, *, offset: int | None = None,
          timestamp_ms: int | None = None) -> Event | str:  # fmt: skip
    """The decoded event, or a human-readable reason string when it must be refused. With the
    record's ``offset`` (and timestamp), an event without ``event_id`` (``event_time``) gets
    the one its place on the topic gives (:func:`~scheduling.events.with_record_identity`)."""
    ingested = topic in INGESTED
    ev = decode_or_reason(raw, topic, settings.max_message_bytes if ingested else None)
    if isinstance(ev, str):
        return ev
    if offset is not None:
        try:
            ev = with_record_identity(ev, topic, partition, offset, timestamp_ms)
        except ValueError as e:
            return f"invalid {topic} event: {e}"
    if not ingested:
        return ev
    return misplaced_reason(ev, partition, settings) or ev


def decode_or_reason(raw: bytes | None, topic: str, max_bytes: int | None) -> Any:
    """The decoded event, or a human-readable reason string when it is malformed (or over
    ``max_bytes``; None: no limit)."""
    if raw is None:
        return "empty message (null value)"
    if max_bytes is not None and len(raw) > max_bytes:
        return f"message of {len(raw)} bytes exceeds the {max_bytes}-byte limit"
    try:
        return decode(topic, raw)
    except ValueError as e:
        return f"invalid {topic} event: {e}"
    except UnicodeDecodeError as e:
        return f"not UTF-8: {e}"
    except (OverflowError, RecursionError, TypeError) as e:  # a message no schema check foresaw: its reason, not
        return f"invalid {topic} event: {type(e).__name__}: {e}"  # a stopped agent (found by review)


def misplaced_reason(ev: Any, partition: int, s: Settings) -> str | None:
    """Every topic is partitioned by cluster (tables and their changelogs rely on it): an
    event on another partition is refused with a reason rather than split the state."""
    cluster = getattr(ev, "cluster", None)
    if cluster is None or partition < 0:
        return None
    want = partition_for(cluster, s.partitions)
    if partition == want:
        return None
    return (f"event of cluster {cluster!r} arrived on partition {partition}, but that cluster's events "
            f"belong on partition {want} (crc32(cluster) % {s.partitions}): publish with "
            "scheduling.events.partition_for, as streams.producer.EventProducer does")  # fmt: skip


def record_ms(msg: Any) -> int | None:
    """A consumed record's Kafka timestamp in ms (Faust gives seconds); None when it has none."""
    return round(msg.timestamp * 1000) if msg.timestamp is not None else None


def ahead_of_clock(t: datetime, skew_s: float, now: float | None = None, *, what: str = "event_time") -> str | None:
    """Why an event stamped ``t`` (its ``what``) is refused: further ahead of this worker's clock than
    ``skew_s`` (``SEMSCHED_MAX_CLOCK_SKEW``); None when it is not."""
    ahead = t.timestamp() - (time.time() if now is None else now)
    if ahead <= skew_s:
        return None
    return (f"{what} {t.isoformat()} is {ahead:,.0f} s ahead of the worker's clock (more than "
            f"SEMSCHED_MAX_CLOCK_SKEW={skew_s:g} s): is the producer's clock right?")
