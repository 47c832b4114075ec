"""Tests for ops.kafka.broker: a real KRaft broker exercised with aiokafka.

The ``integration`` tests share one broker per session (``kafka_broker`` from
tests/conftest_kafka.py); the others are fast checks that need neither Java nor Kafka.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

from ops.kafka.broker import JarResolutionError, KafkaBroker, KafkaBrokerError

# Registers the kafka_broker fixture when the main conftest has not done so already
# (pytest skips a plugin that is already registered under the same name).
pytest_plugins = ["tests.conftest_kafka"]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _create_topic(bootstrap: str, name: str, partitions: int = 4) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name=name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


# --------------------------------------------------------------------------- integration


@pytest.mark.integration
def test_status_reports_running(kafka_broker: KafkaBroker) -> None:
    status = kafka_broker.status()
    assert status.running
    assert status.reachable
    assert status.pid is not None and status.pid > 0
    assert status.port == kafka_broker.port
    assert status.bootstrap == f"127.0.0.1:{kafka_broker.port}" == kafka_broker.bootstrap
    assert kafka_broker.pid_file.read_text().strip() == str(status.pid)
    # A second start() on a running broker is a no-op.
    assert kafka_broker.start().pid == status.pid


@pytest.mark.integration
async def test_create_topic_with_four_partitions(kafka_broker: KafkaBroker) -> None:
    name = _topic("semsched-admin")
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name=name, num_partitions=4, replication_factor=1)])
        # KRaft propagates new topics to the broker's metadata cache asynchronously
        for _ in range(50):
            if name in await admin.list_topics():
                break
            await asyncio.sleep(0.1)
        assert name in await admin.list_topics()
        (desc,) = await admin.describe_topics([name])
        assert desc["error_code"] == 0
        assert sorted(p["partition"] for p in desc["partitions"]) == [0, 1, 2, 3]
    finally:
        await admin.close()


@pytest.mark.integration
async def test_auto_create_topics_disabled(kafka_broker: KafkaBroker) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        topics = await admin.list_topics()
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=3000)
    await producer.start()
    try:
        missing = _topic("semsched-missing")
        with pytest.raises(Exception):  # noqa: B017 - aiokafka raises KafkaTimeoutError here
            await asyncio.wait_for(producer.partitions_for(missing), 5)
        assert missing not in topics
    finally:
        await producer.stop()


@pytest.mark.integration
async def test_produce_and_consume(kafka_broker: KafkaBroker) -> None:
    name = _topic("semsched-roundtrip")
    await _create_topic(kafka_broker.bootstrap, name)

    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    await producer.start()
    try:
        meta = await producer.send_and_wait(name, b"hello", key=b"cluster-a", partition=2)
        assert meta.partition == 2 and meta.offset == 0
        big = b"x" * (900 * 1024)  # close to the ~1 MiB message.max.bytes
        await producer.send_and_wait(name, big, partition=2)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=2 * 1024 * 1024,
    )
    await consumer.start()
    try:
        tp = TopicPartition(name, 2)
        consumer.assign([tp])
        first = await asyncio.wait_for(consumer.getone(), 15)
        second = await asyncio.wait_for(consumer.getone(), 15)
    finally:
        await consumer.stop()
    assert (first.key, first.value, first.partition, first.offset) == (b"cluster-a", b"hello", 2, 0)
    assert len(second.value) == 900 * 1024


@pytest.mark.integration
async def test_consumer_group_commit_and_fetch_offsets(kafka_broker: KafkaBroker) -> None:
    """Group join (JoinGroup/SyncGroup), OffsetCommit and OffsetFetch against Kafka 4.x."""
    name = _topic("semsched-group")
    group = _topic("semsched-archiver")
    await _create_topic(kafka_broker.bootstrap, name)

    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait(name, f"m{i}".encode(), partition=1)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        name,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        got = [await asyncio.wait_for(consumer.getone(), 30) for _ in range(2)]
        assert [m.value for m in got] == [b"m0", b"m1"]
        assert len(consumer.assignment()) == 4  # subscribed group member owns all partitions
        tp = TopicPartition(name, 1)
        await consumer.commit({tp: OffsetAndMetadata(got[-1].offset + 1, "semsched")})
        assert await consumer.committed(tp) == 2
    finally:
        await consumer.stop()

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        groups = [g[0] for g in await admin.list_consumer_groups()]
    finally:
        await admin.close()
    assert offsets[TopicPartition(name, 1)].offset == 2
    assert group in groups

    # A new member of the same group resumes after the committed offset.
    resumed = AIOKafkaConsumer(
        name,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await resumed.start()
    try:
        msg = await asyncio.wait_for(resumed.getone(), 30)
    finally:
        await resumed.stop()
    assert (msg.value, msg.offset) == (b"m2", 2)


# --------------------------------------------------------------------------- no broker needed


def test_server_properties_is_single_node_kraft(tmp_path: Path) -> None:
    broker = KafkaBroker(port=39092, data_dir=tmp_path, lib_dir=tmp_path / "lib")
    props = dict(
        line.split("=", 1) for line in broker.server_properties().splitlines() if line and line[0] != "#"
    )
    assert broker.controller_port == 39093
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:39093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093"
    assert props["log.dirs"] == str(tmp_path / "kraft-combined-logs")
    assert props["auto.create.topics.enable"] == "false"
    assert props["num.partitions"] == "4"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    ):
        assert props[key] == "1"
    assert broker.bootstrap == "127.0.0.1:39092"


def test_ports_outside_the_tcp_range_are_refused(tmp_path: Path) -> None:
    """--port 65535 made the controller's 65536, which socket.bind refused with an OverflowError (not an
    OSError): a traceback (found by the ops review)."""
    from ops.ports import port_free

    with pytest.raises(ValueError, match=r"controller port 65536 is not a TCP port \(1..65535\): it is port \+ 1"):
        KafkaBroker(port=65535, data_dir=tmp_path)
    with pytest.raises(ValueError, match="port 0 is not a TCP port"):
        KafkaBroker(port=0, data_dir=tmp_path, controller_port=39093)
    assert KafkaBroker(port=65535, data_dir=tmp_path, controller_port=65534).controller_port == 65534
    assert port_free(65536) is False


def test_a_broker_that_outlives_sigkill_is_not_reported_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stop() said True ("Kafka stopped") and removed broker.pid when the broker was still there after
    SIGKILL (found by the ops review): nothing could stop it later."""
    broker = KafkaBroker(port=39092, data_dir=tmp_path, lib_dir=tmp_path / "lib")
    (tmp_path / "broker.pid").write_text("4242\n")
    sent: list[int] = []
    monkeypatch.setattr(KafkaBroker, "_alive", lambda self, pid: True)  # (a process stuck in the kernel)
    monkeypatch.setattr(KafkaBroker, "_signal", lambda self, pid, sig: sent.append(sig))
    monkeypatch.setattr(KafkaBroker, "_wait_dead", lambda self, pid, timeout: False)
    with pytest.raises(KafkaBrokerError, match=r"the broker \(pid 4242\) still runs 10 s after SIGKILL"):
        broker.stop(timeout=0)
    assert sent == [signal.SIGTERM, signal.SIGKILL]
    assert broker.read_pid() == 4242


def test_formatting_that_hangs_is_a_broker_error(tmp_path: Path) -> None:
    """A StorageTool run past its timeout raised subprocess.TimeoutExpired, not KafkaBrokerError:
    `kafka start` showed a traceback (found by the ops review)."""
    from ops.kafka import config

    java = tmp_path / "java"
    java.write_text("#!/bin/sh\necho formatting...\nexec sleep 30\n")
    java.chmod(0o755)
    (tmp_path / "server.properties").write_text("")
    with pytest.raises(KafkaBrokerError, match=r"(?s)Formatting Kafka storage timed out after 0.5s.*StorageTool"):
        config.format_storage(config_file=tmp_path / "server.properties", log_dirs=tmp_path / "logs",
                              cluster_id_file=tmp_path / "cluster.id", java=str(java), data_dir=tmp_path,
                              lib_dir=tmp_path / "lib", timeout_s=0.5)  # fmt: skip


def test_stop_and_status_when_not_running(tmp_path: Path) -> None:
    broker = KafkaBroker(port=39092, data_dir=tmp_path, lib_dir=tmp_path / "lib")
    assert broker.stop() is False
    (tmp_path / "broker.pid").write_text("999999999\n")  # stale PID file
    status = broker.status()
    assert not status.running and status.pid is None
    assert broker.stop() is False
    assert not (tmp_path / "broker.pid").exists()


def test_a_pid_file_naming_another_data_dirs_broker_is_stale(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    """PIDs are reused (a reboot, a container restart) while PID files stay: one that now names another
    data dir's broker must not make `kafka status` report it nor `kafka stop` stop it (the ops review
    stopped the session's broker this way)."""
    other = KafkaBroker(port=39092, data_dir=tmp_path, lib_dir=tmp_path / "lib")
    (tmp_path / "broker.pid").write_text(f"{kafka_broker.read_pid()}\n")
    assert not other.status().running and other.stop() is False
    assert kafka_broker.is_running() and kafka_broker.status().running
    # the same data dir by another path (a symlinked state dir) is the same broker
    (tmp_path / "link").symlink_to(kafka_broker.data_dir)
    assert KafkaBroker(port=kafka_broker.port, data_dir=tmp_path / "link").is_running()


def test_starting_a_running_data_dir_on_another_port_names_the_port_it_runs_on(kafka_broker: KafkaBroker) -> None:
    """(The ops review: it said "does not answer; stop it first", not which port it runs on.)"""
    other = KafkaBroker(port=39092, data_dir=kafka_broker.data_dir, controller_port=39093)
    with pytest.raises(KafkaBrokerError, match=rf"already runs from .* on 127.0.0.1:{kafka_broker.port}, not "
                                               rf"127.0.0.1:39092: use --port {kafka_broker.port}, or stop it"):
        other.start(timeout=10)
    assert kafka_broker.status().running and kafka_broker.probe()


def test_mvn_failure_quotes_command_and_output(tmp_path: Path) -> None:
    pom = tmp_path / "pom.xml"
    pom.write_text("<project><modelVersion>4.0.0</modelVersion><broken></project>")
    broker = KafkaBroker(port=39092, data_dir=tmp_path / "data", lib_dir=tmp_path / "lib", pom=pom)
    killed = tmp_path / ".lib-k1ll3d"  # what a resolution killed by SIGTERM/SIGKILL left (43 MB each: the ops review)
    (killed / "x.jar").parent.mkdir()
    (killed / "x.jar").write_bytes(b"partial")
    with pytest.raises(JarResolutionError) as info:
        broker.ensure_jars()
    message = str(info.value)
    assert "mvn -q -B -f" in message and "dependency:copy-dependencies" in message
    assert str(pom) in message
    assert info.value.stderr_tail
    assert not broker.jars_ready()
    assert not killed.exists() and not list(tmp_path.glob(".lib-*"))  # swept under the lock; this run's removed
