"""``EventProducer`` against the session's real Kafka broker: every delivery is checked. A
record the broker refuses (over a topic's ``max.message.bytes``, smaller than the producer's
own request limit, so it leaves the client) raises ``DeliveryError`` on ``flush``, on the next
``send`` and on leaving the ``async with``; it is never silently gone."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from scheduling.events import JobSubmitted
from streams.producer import DeliveryError, EventProducer
from streams.settings import Settings

pytestmark = pytest.mark.integration

SMALL_LIMIT = 4096  # the refusing topic's max.message.bytes


def _settings(kafka_broker) -> Settings:  # type: ignore[no-untyped-def]
    return Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"p{uuid.uuid4().hex[:10]}.", partitions=2)


async def _create(settings: Settings, topic: str, **config: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(settings.topic(topic), num_partitions=settings.partitions,
                                            replication_factor=1, topic_configs=config)])  # fmt: skip
    finally:
        await admin.close()


async def _count(settings: Settings, topic: str) -> int:
    """Records on the topic (the sum of its partitions' end offsets)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(settings.topic(topic), p) for p in range(settings.partitions)])
        return sum(ends.values())
    finally:
        await consumer.stop()


def _job(i: int) -> JobSubmitted:
    return JobSubmitted(job_id=f"j{i}", cluster="default", cpu_milli=1000, memory_mib=1024)


async def test_every_event_delivered_is_counted(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    settings = _settings(kafka_broker)
    await _create(settings, "jobs.submitted")
    async with EventProducer(settings) as prod:
        for i in range(40):
            await prod.send("jobs.submitted", _job(i))
        await prod.flush()
        assert (prod.delivered, prod.failed) == (40, 0)
    assert await _count(settings, "jobs.submitted") == 40


async def test_a_refused_record_raises_on_flush_and_on_the_next_send(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    settings = _settings(kafka_broker)
    await _create(settings, "jobs.submitted", **{"max.message.bytes": str(SMALL_LIMIT)})
    async with EventProducer(settings) as prod:
        await prod.send("jobs.submitted", _job(0))
        await prod.flush()  # a small one goes through
        await prod.send_raw("jobs.submitted", b"x" * (4 * SMALL_LIMIT), key=b"big", cluster="default")
        with pytest.raises(DeliveryError) as err:
            await prod.flush()
        assert err.value.failed >= 1 and err.value.topic == settings.topic("jobs.submitted")
        assert "TooLarge" in err.value.reason, err.value.reason
        assert prod.delivered == 1
        with pytest.raises(DeliveryError):  # nothing is published past the hole
            await prod.send("jobs.submitted", _job(1))
    assert await _count(settings, "jobs.submitted") == 1


async def test_leaving_the_context_raises_what_was_not_flushed(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    settings = _settings(kafka_broker)
    await _create(settings, "jobs.submitted", **{"max.message.bytes": str(SMALL_LIMIT)})
    with pytest.raises(DeliveryError, match="not delivered"):
        async with EventProducer(settings) as prod:
            await prod.send_raw("jobs.submitted", b"x" * (4 * SMALL_LIMIT), key=b"big", cluster="default")


async def test_a_broker_that_stops_answering_ends_the_wait_with_its_address(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Its only broker gone, aiokafka retried a batch for ever (the partition still had a leader in
    its metadata): a demo whose broker died hung, and Ctrl-C did not stop it (the ops review). A
    broker of this test's own, killed with SIGKILL after the producer has used it."""
    import asyncio
    import os
    import signal

    from ops.kafka.broker import KafkaBroker
    from ops.ports import port_free
    from tests.conftest_kafka import free_port

    port = free_port()
    broker = KafkaBroker(port=port, data_dir=tmp_path / "kafka", controller_port=free_port({port}), tied=True)
    broker.start(timeout=90)
    try:
        s = Settings(bootstrap=broker.bootstrap, topic_prefix="dead.", partitions=1)
        await _create(s, "jobs.submitted")

        async def publish_past_the_crash() -> None:
            async with EventProducer(s, answer_timeout_s=3.0) as p:
                await p.send("jobs.submitted", _job(0))
                await p.flush()  # answered: the broker is there
                os.kill(broker.read_pid(), signal.SIGKILL)  # a crash, an OOM kill
                for _ in range(100):
                    if port_free(port):
                        break
                    await asyncio.sleep(0.1)
                await p.send("jobs.submitted", _job(1))
                await p.flush()  # raises; leaving the block then waits at most 3 s more, and lets it through

        with pytest.raises(DeliveryError, match=rf"{broker.bootstrap}: the broker did not answer within 3 s"):
            await asyncio.wait_for(publish_past_the_crash(), 60)  # (without the bound: a TimeoutError here, not a hang)
        await asyncio.sleep(0.5)  # nothing of the producer goes on retrying the dead broker
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()
                and "aiokafka" in getattr(getattr(t.get_coro(), "cr_code", None), "co_filename", "")]  # fmt: skip
        assert left == [], left
    finally:
        broker.stop()


async def test_an_event_over_the_workers_limit_is_refused_at_the_sender() -> None:
    """Found by review: a valid event over SEMSCHED_MAX_MESSAGE_BYTES (its labels unbounded) was sent and
    flushed without a word, and turned up in the dead-letter topic. No broker needed: refused before."""
    settings = Settings(bootstrap="127.0.0.1:1", max_message_bytes=4096)
    big = JobSubmitted(job_id="big", cpu_milli=1, labels={f"k{i}": "v" * 100 for i in range(60)})
    prod = EventProducer(settings)
    with pytest.raises(ValueError, match=r"jobs.submitted event of [\d,]+ bytes is over the worker's 4,096-byte limit"):
        await prod.send("jobs.submitted", big)
