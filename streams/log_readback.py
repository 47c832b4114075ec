"""Reading the input logs back: what the worker group has consumed of the topics that change
the job tables, for :mod:`streams.log_restore`.

The group's committed offset on a partition says its events were handled, not that the table
writes they caused reached the changelog (Faust may commit first). :func:`read_back` returns
the messages before the committed offsets of the given partitions, read with a consumer of
its own; the live consumption starts at those offsets and will not bring them again. The
writes a killed worker lost are those in flight when it died, so the read starts a window of
``settings.restore_window`` messages (10,000 per partition and topic; 0 = the whole log)
before each committed offset, and at the first one retention has left at most: a bounded
read however long the topics grow. A committed offset past the end of the log (a topic
deleted and created again) is read up to the end.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.offset_starts import committed_offsets
from streams.settings import Settings

#: the topics whose events change the job tables (telemetry is sent again by the nodes)
RESTORED_TOPICS = ("jobs.submitted", "decisions", "jobs.lifecycle")
#: read back too, on the same partitions up to its end: the dead letters say which of those events the
#: worker refused (:func:`streams.log_restore.restore` leaves them refused)
REFUSALS = "deadletter"

# short topic name -> (partition, offset, value, timestamp ms), in offset order
Logged = dict[str, list[tuple[int, int, bytes, int | None]]]


async def read_back(settings: Settings, group_id: str, partitions: Iterable[int]) -> Logged:
    """Per topic of ``RESTORED_TOPICS`` (its short name), ``(partition, offset, value)`` of the messages on
    ``partitions`` before the group's committed offsets (read now), from the restore window
    on: partition by partition, each in offset order; and under :data:`REFUSALS`, the dead letters
    on ``partitions`` up to the end, from the time of the earliest input read there (a dead letter
    comes after its event; found by the review of the change: counted back from the dead letters'
    end, a burst of other refusals pushed a submission's out of the window)."""
    out: Logged = {t: [] for t in (*RESTORED_TOPICS, REFUSALS)}
    names = {settings.topic(t): t for t in (*RESTORED_TOPICS, REFUSALS)}
    tps = [TopicPartition(settings.topic(t), p) for t in RESTORED_TOPICS for p in sorted(set(partitions))]
    done = await committed_offsets(settings, group_id, tps)
    if not any(done.values()):
        return out
    window = settings.restore_window
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(list(done))
        upto = {tp: min(off, ends[tp]) for tp, off in done.items() if min(off, ends[tp]) > 0}
        first = await consumer.beginning_offsets(list(upto))  # (retention may have deleted the start)
        starts = {tp: max(first[tp], off - window) if window else first[tp] for tp, off in upto.items()}
        for tp, messages in (await _read(consumer, starts, upto)).items():
            out[names[tp.topic]] += messages
        since: dict[int, int] = {}  # per partition: the earliest input's timestamp read back there
        for topic in RESTORED_TOPICS:
            for partition, _, _, stamp in out[topic]:
                if stamp is not None:
                    since[partition] = min(stamp, since.get(partition, stamp))
        refusals = {TopicPartition(settings.topic(REFUSALS), p): t for p, t in since.items()}
        if refusals:
            found = await consumer.offsets_for_times(refusals)
            dl_ends = await consumer.end_offsets(list(refusals))
            dl_starts = {tp: at.offset for tp, at in found.items() if at is not None and at.offset < dl_ends[tp]}
            out[REFUSALS] = [m for ms in (await _read(consumer, dl_starts, dl_ends)).values() for m in ms]
    finally:
        await consumer.stop()
    for messages in out.values():
        messages.sort(key=lambda m: m[:2])
    return out


async def _read(consumer: AIOKafkaConsumer, starts: dict[TopicPartition, int], upto: dict[TopicPartition, int]
                ) -> dict[TopicPartition, list[tuple[int, int, bytes, int | None]]]:  # fmt: skip
    """``(partition, offset, value, timestamp)`` of each partition's messages from ``starts`` up to ``upto``."""
    out: dict[TopicPartition, list[tuple[int, int, bytes, int | None]]] = {tp: [] for tp in starts}
    if not starts:
        return out
    consumer.assign(list(starts))
    for tp, off in starts.items():
        consumer.seek(tp, off)
    left = {tp for tp in starts if await consumer.position(tp) < upto[tp]}
    while left:
        batch = await consumer.getmany(*left, timeout_ms=1000)
        for tp, messages in batch.items():
            out[tp] += [(tp.partition, m.offset, m.value, m.timestamp) for m in messages if m.offset < upto[tp]]
        left = {tp for tp in left if await consumer.position(tp) < upto[tp]}
    return out
