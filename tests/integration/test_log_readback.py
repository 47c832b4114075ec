"""The input logs read back from a real broker at an assignment (streams/log_readback.py): every
message of the topics that change the job tables, from each assigned partition's start up to
the group's committed offset (what the live consumption will not bring again), partition by
partition, in offset order; with a window, only that many messages before it; an offset past
the end of the log, up to the end."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streams.log_readback import read_back
from streams.settings import Settings
from streams.topics import ensure_topics

pytestmark = pytest.mark.integration


async def test_the_logs_are_read_back_from_the_start_up_to_the_committed_offsets(kafka_bootstrap: str) -> None:
    settings = Settings(bootstrap=kafka_bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.")
    await ensure_topics(settings)
    decisions, submitted = settings.topic("decisions"), settings.topic("jobs.submitted")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:  # a dead letter from before anything read back (another event's): not read
        await producer.send_and_wait(settings.topic("deadletter"), b"x2-early", partition=2)
        await asyncio.sleep(0.05)  # (its timestamp before the inputs')
        for i in range(5):
            await producer.send_and_wait(decisions, f"d2-{i}".encode(), partition=2)
            await producer.send_and_wait(submitted, f"s2-{i}".encode(), partition=2)
        await producer.send_and_wait(decisions, b"d0-0", partition=0)
        for p, n in ((2, 3), (3, 1)):  # dead letters: read to the end where inputs are read back, from their time
            for i in range(n):
                await producer.send_and_wait(settings.topic("deadletter"), f"x{p}-{i}".encode(), partition=p)
        await producer.send_and_wait(submitted, b"s1-0", partition=1)  # nothing committed there
        group = f"g{uuid.uuid4().hex[:8]}"
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:  # the group has handled decisions 2:0..2 and 0:0, and submissions 2:0..3; its offset
            # on decisions 3 is past the end of the log (a topic deleted and created again)
            committed = {TopicPartition(decisions, 2): 3, TopicPartition(decisions, 0): 1,
                         TopicPartition(submitted, 2): 4, TopicPartition(decisions, 3): 50}  # fmt: skip
            consumer.assign(list(committed))
            await consumer.commit(committed)
        finally:
            await consumer.stop()
        await producer.send_and_wait(submitted, b"s2-late", partition=2)  # not handled by the group yet
        stamped = await read_back(settings, group, {0, 1, 2, 3})
        assert all(isinstance(ts, int) and ts > 0 for records in stamped.values() for *_, ts in records)  # the broker's
        logged = _unstamped(stamped)
        windowed = _unstamped(await read_back(settings.model_copy(update={"restore_window": 2}), group, {0, 1, 2, 3}))
        assert _unstamped(await read_back(settings, group, {0, 3})) == {"decisions": [(0, 0, b"d0-0")],
                                                                        "jobs.submitted": [], "jobs.lifecycle": [],
                                                                        "deadletter": []}  # fmt: skip  (3: no input)
        assert await read_back(settings, "another-group", {0, 1, 2, 3}) == {t: [] for t in logged}
    finally:
        await producer.stop()
    assert logged == {"decisions": [(0, 0, b"d0-0"), (2, 0, b"d2-0"), (2, 1, b"d2-1"), (2, 2, b"d2-2")],
                      "jobs.submitted": [(2, i, f"s2-{i}".encode()) for i in range(4)],
                      "jobs.lifecycle": [],
                      "deadletter": [(2, 1 + i, f"x2-{i}".encode()) for i in range(3)]}  # fmt: skip
    # a window of 2 messages: the last two before each committed offset (the dead letters: from their time)
    assert windowed == {"decisions": [(0, 0, b"d0-0"), (2, 1, b"d2-1"), (2, 2, b"d2-2")],
                        "jobs.submitted": [(2, 2, b"s2-2"), (2, 3, b"s2-3")], "jobs.lifecycle": [],
                        "deadletter": [(2, 1 + i, f"x2-{i}".encode()) for i in range(3)]}  # fmt: skip


def _unstamped(logged: dict) -> dict:  # type: ignore[type-arg]
    """``(partition, offset, value)``: the records without their timestamps."""
    return {topic: [record[:3] for record in records] for topic, records in logged.items()}
