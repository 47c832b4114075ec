"""Pytest plugin: a real single-node Kafka broker, started once per test session.

Load it from the main conftest (``pytest_plugins = ["tests.conftest_kafka"]`` or a plain
import of the fixtures). The ``kafka_broker`` fixture starts :class:`ops.kafka.KafkaBroker`
on free ports in a temporary data dir, yields it, and stops it by PID at session end.

If the broker's jars cannot be resolved (Maven) or the broker does not come up, the fixture
FAILS with the underlying error (mvn command + output tail, or the broker log tail); it never
skips, so a broken Kafka setup cannot masquerade as a green run.

Environment knobs: ``SEMSCHED_KAFKA_LIB`` (cached lib dir), ``SEMSCHED_KAFKA_START_TIMEOUT``
(seconds, default 90).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from ops.kafka.broker import KafkaBroker, KafkaBrokerError

__all__ = ["free_port", "kafka_bootstrap", "kafka_broker"]


def free_port(exclude: set[int] | None = None) -> int:
    """An unused TCP port on 127.0.0.1 (not in ``exclude``)."""
    exclude = exclude or set()
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in exclude:
            return port


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running local Kafka broker (KRaft, 127.0.0.1), shared by the whole session. Its ports are picked
    free and bound seconds later: one another process took meanwhile is tried again with other ports
    (three times; found by the flakiness review: one collision errored every Kafka test)."""
    timeout = float(os.environ.get("SEMSCHED_KAFKA_START_TIMEOUT", "90"))
    error: str | None = None
    for _ in range(3):
        port = free_port()
        broker = KafkaBroker(
            port=port,
            data_dir=tmp_path_factory.mktemp("kafka"),
            controller_port=free_port({port}),
            tied=True,  # a test session killed outright leaves no broker behind
        )
        try:
            broker.start(timeout=timeout)
            error = None
            break
        except KafkaBrokerError as exc:
            broker.stop()
            error = str(exc)
            if "in use" not in error.lower():  # ("Address already in use" in the broker's log tail, too)
                break
        except BaseException:
            broker.stop()
            raise
    if error is not None:  # fail outside the except block: no chained traceback noise
        pytest.fail(f"local Kafka broker could not be started:\n{error}", pytrace=False)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    """Bootstrap servers string (``127.0.0.1:<port>``) of the session broker."""
    return kafka_broker.bootstrap


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every record on the full topic name ``topic`` now, partition by partition in offset order (no
    consumer group: nothing is committed)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        out: list[Any] = []
        try:
            parts = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            ends = await consumer.end_offsets(parts)
            while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
                for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                    out += msgs
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())
