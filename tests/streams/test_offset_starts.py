"""Where the worker group's consumption of a partition starts, against the session's real
broker: the committed offset, else the partition's first, and never before the first record
retention (here ``delete_records``) has left."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import OffsetAndMetadata

from streams.offset_starts import start_offsets
from streams.settings import Settings

pytestmark = pytest.mark.integration


async def test_committed_else_first_and_never_before_what_retention_left(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"o{uuid.uuid4().hex[:8]}.", partitions=3)
    topic, group = s.topic("jobs.submitted"), f"{s.topic_prefix}worker"
    tps = [TopicPartition(topic, p) for p in range(3)]
    admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap)
    await admin.start()
    producer = AIOKafkaProducer(bootstrap_servers=s.bootstrap)
    await producer.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        for p in range(3):
            for i in range(6):
                await producer.send_and_wait(topic, f"r{i}".encode(), partition=p)
        committer = AIOKafkaConsumer(bootstrap_servers=s.bootstrap, group_id=group, enable_auto_commit=False)
        await committer.start()
        try:
            committer.assign([tps[0], tps[2]])
            await committer.commit({tps[0]: OffsetAndMetadata(3, ""), tps[2]: OffsetAndMetadata(2, "")})
        finally:
            await committer.stop()
        await admin.delete_records({tps[2]: RecordsToDelete(before_offset=4)})  # retention took 0..3
        assert await start_offsets(s, group, tps) == {tps[0]: 3, tps[1]: 0, tps[2]: 4}
    finally:
        await producer.stop()
        await admin.close()


async def test_a_lookup_that_partitions_were_revoked_during_is_made_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Revoked while the lookup was on its way: another worker may have moved the committed
    offsets, so what it found is not kept and the start is looked up once more."""
    import asyncio

    import streams.offset_starts as starts

    s = Settings(bootstrap="127.0.0.1:1", topic_prefix="u.")
    tp = TopicPartition(s.topic("jobs.submitted"), 0)
    answers = [{tp: 5}, {tp: 9}]  # the committed offset before and after the other worker's commit
    release = asyncio.Event()

    async def lookup(settings, group_id, tps):  # type: ignore[no-untyped-def]
        await release.wait()
        return answers.pop(0)

    monkeypatch.setattr(starts, "start_offsets", lookup)
    o = starts.OffsetStarts(s, "g", {tp.topic})
    asking = asyncio.ensure_future(o.of(tp, [tp]))
    await asyncio.sleep(0)
    o.forget([tp])  # revoked (and given back) while the first lookup is under way
    release.set()
    assert await asking == 9 and answers == []
