"""A dead letter the real broker refuses is tried again until it takes it: the malformed event
behind it is handled (and its offset committed) only then, and the events after it wait, none
lost. The refusal is real: the dead-letter topic's ``max.message.bytes`` is set below the
record's size, then raised again (as an operator fixing the topic would)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from ops.traces import get_loader
from scheduling.events import partition_for
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish, topic_records

pytestmark = pytest.mark.integration


async def _limit_deadletter(settings: Settings, max_bytes: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, settings.topic("deadletter"),
                                                  configs={"max.message.bytes": str(max_bytes)})])  # fmt: skip
    finally:
        await admin.close()


async def _send_raw(settings: Settings, value: bytes, key: bytes, partition: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic("jobs.submitted"), value, key=key, partition=partition)
    finally:
        await producer.stop()


def test_a_refused_dead_letter_is_tried_again_and_nothing_after_it_is_lost(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    asyncio.run(_limit_deadletter(p.settings, 100))  # any dead letter is larger
    p.start_worker()
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=1)
    publish(p.settings, list(loader.nodes()))
    [good] = [tj.event for tj in loader.jobs()]
    part = partition_for(good.cluster, p.settings.partitions)
    asyncio.run(_send_raw(p.settings, b"{not json", b"bad", part))  # then a good job behind it
    publish(p.settings, [good])
    st = p.wait(lambda s: s["counters"]["deadletter_retries"] >= 2, timeout=60, what="the dead letter tried again")
    assert st["counters"]["accepted"] == 0 and st["finished"] == 0, st  # the good job waits behind it
    assert "bad" not in topic_records(p.settings, "deadletter")
    asyncio.run(_limit_deadletter(p.settings, 1024 * 1024))
    st = p.wait(lambda s: s["finished"] == 1, timeout=90, what="the job behind the refused dead letter")
    assert st["counters"]["deadletters"] == 1 and st["counters"]["accepted"] == 1
    assert "bad" in topic_records(p.settings, "deadletter")
    log = p.children["worker"].log_path.read_text(errors="replace")
    assert "not accepted" in log and "trying again" in log
