"""The restart gate reads the decisions log back from a real broker (streams/catchup.py): every
message from each assigned partition's start up to its end offset at assignment, in order."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streams.catchup import CatchUp
from streams.settings import Settings
from streams.topics import ensure_topics

pytestmark = pytest.mark.integration


async def test_the_decisions_log_is_read_back_from_the_start_up_to_the_end_at_assignment(kafka_bootstrap: str) -> None:
    settings = Settings(bootstrap=kafka_bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.")
    await ensure_topics(settings)
    topic = settings.topic("decisions")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"p2-{i}".encode(), partition=2)
        await producer.send_and_wait(topic, b"p0-0", partition=0)
        group = f"g{uuid.uuid4().hex[:8]}"
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:  # the group commits an empty partition only: partitions 0 and 2 are to be replayed
            consumer.assign([TopicPartition(topic, 1)])
            await consumer.commit({TopicPartition(topic, 1): 0})
        finally:
            await consumer.stop()
        gate = CatchUp(settings, topic, group_id=group)
        assert await gate.ready({}, recovering=False, assigned={0, 1, 2, 3}) is False
        await producer.send_and_wait(topic, b"p2-late", partition=2)  # after the assignment's end offsets
        logged = await gate.logged_decisions()
    finally:
        await producer.stop()
    assert logged == [(0, b"p0-0"), *((2, f"p2-{i}".encode()) for i in range(5))]
    assert await CatchUp(settings, topic, group_id="g").logged_decisions() == []  # no assignment read yet
