"""``ensure_topics`` and ``EventProducer`` against the session's real Kafka broker: topics that exist
with another partition count than ``SEMSCHED_PARTITIONS`` are refused by name, before anything is
created or sent (streams/topics.py). Before, a topic with fewer partitions failed only the clusters
that hashed past its end, with aiokafka's bare "Unrecognized partition". A topic the broker refuses
to create (a replication factor above its broker count) says so with the broker's reason: before,
the refusal was not read and the caller went on as if the topics existed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from scheduling.events import JobSubmitted, partition_for
from streams.producer import EventProducer
from streams.settings import TOPICS, Settings
from streams.topics import PartitionCountError, TopicsRefused, ensure_topics

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _settings(kafka_broker, partitions: int, prefix: str | None = None) -> Settings:  # type: ignore[no-untyped-def]
    return Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=prefix or f"t{uuid.uuid4().hex[:10]}.",
                    partitions=partitions)  # fmt: skip


async def _admin(settings: Settings) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    return admin


async def _create(settings: Settings, topic: str, partitions: int) -> None:
    """An existing topic: created, and listed (KRaft propagates a new topic to the brokers' metadata
    asynchronously; under load a listing right after missed it, and ensure_topics took it for a missing one)."""
    admin = await _admin(settings)
    try:
        await admin.create_topics([NewTopic(settings.topic(topic), num_partitions=partitions, replication_factor=1)])
        for _ in range(100):
            if settings.topic(topic) in await admin.list_topics():
                break
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def _ours(settings: Settings) -> set[str]:
    admin = await _admin(settings)
    try:
        return {t for t in await admin.list_topics() if t.startswith(settings.topic_prefix)}
    finally:
        await admin.close()


async def test_matching_topics_pass_and_only_missing_ones_are_created(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = _settings(kafka_broker, 2)
    await _create(s, "jobs.submitted", 2)
    created = await ensure_topics(s)
    assert set(created) == {s.topic(t) for t in TOPICS} - {s.topic("jobs.submitted")}
    assert await ensure_topics(s) == []


async def test_another_partition_count_is_refused_by_name_and_nothing_is_created(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = _settings(kafka_broker, 4)
    await _create(s, "jobs.submitted", 2)
    with pytest.raises(PartitionCountError) as e:
        await ensure_topics(s)
    assert e.value.found == {s.topic("jobs.submitted"): 2} and e.value.expected == 4
    assert f"SEMSCHED_PARTITIONS is 4, but these topics have another partition count: {s.topic('jobs.submitted')} (2)" in str(e.value)
    assert "set SEMSCHED_PARTITIONS=2" in str(e.value)
    assert await _ours(s) == {s.topic("jobs.submitted")}  # the other topics were not created with 4
    # more partitions than the setting is refused too (the worker would not look where events land)
    with pytest.raises(PartitionCountError, match=r"SEMSCHED_PARTITIONS is 1, .*\(2\)"):
        await ensure_topics(_settings(kafka_broker, 1, s.topic_prefix))


async def test_a_topic_another_process_creates_meanwhile_is_checked_too(kafka_broker, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Created by a rival with its count between our listing and our request (the broker answers 'already
    exists'): found by review, the loser of that race went on without a check."""
    s = _settings(kafka_broker, 4)
    real, raced = AIOKafkaAdminClient.list_topics, []

    async def listed_then_raced(self: AIOKafkaAdminClient) -> list[str]:
        out = await real(self)
        if not raced:
            raced.append(True)
            await _create(s, "jobs.submitted", 2)
        return out

    monkeypatch.setattr(AIOKafkaAdminClient, "list_topics", listed_then_raced)
    with pytest.raises(PartitionCountError, match=r"jobs\.submitted \(2\)"):
        await ensure_topics(s)


async def test_a_topic_the_listing_has_not_caught_up_with_is_checked_before_any_is_created(kafka_broker,
                                                                                           monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """KRaft propagates a new topic to the brokers' metadata asynchronously: a listing right after its creation
    can miss it (found under load). The other topics were then created with another count than it has."""
    s = _settings(kafka_broker, 4)
    await _create(s, "jobs.submitted", 2)
    real, lagged = AIOKafkaAdminClient.list_topics, []

    async def lagging(self: AIOKafkaAdminClient) -> list[str]:
        out = await real(self)
        if not lagged:
            lagged.append(True)
            return [t for t in out if t != s.topic("jobs.submitted")]
        return out

    monkeypatch.setattr(AIOKafkaAdminClient, "list_topics", lagging)
    with pytest.raises(PartitionCountError, match=r"jobs\.submitted \(2\)"):
        await ensure_topics(s)
    monkeypatch.setattr(AIOKafkaAdminClient, "list_topics", real)
    assert await _ours(s) == {s.topic("jobs.submitted")}  # none of the others was created


async def test_a_replication_factor_the_broker_cannot_meet_is_refused_with_its_reason(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = _settings(kafka_broker, 2).model_copy(update={"replication_factor": 2})
    with pytest.raises(TopicsRefused, match="replication factor of 2 cannot be reached") as e:
        await ensure_topics(s)
    assert set(e.value.refused) == {s.topic(t) for t in TOPICS} and "and 3 more" in str(e.value)
    assert await _ours(s) == set()


async def test_the_producer_refuses_a_topic_with_fewer_partitions_before_sending(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = _settings(kafka_broker, 4)
    await _create(s, "jobs.submitted", 2)
    cluster = next(c for c in (f"c{i}" for i in range(100)) if partition_for(c, 4) >= 2)  # past the topic's end
    job = JobSubmitted(job_id="j1", cluster=cluster, cpu_milli=1000, memory_mib=1024)
    async with EventProducer(s) as prod:
        with pytest.raises(PartitionCountError, match=r"jobs\.submitted \(2\)"):
            await prod.send("jobs.submitted", job)
        assert prod.delivered == 0


async def test_the_producer_refuses_a_topic_with_more_partitions(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = _settings(kafka_broker, 2)
    await _create(s, "jobs.submitted", 4)
    async with EventProducer(s) as prod:
        with pytest.raises(PartitionCountError, match=r"SEMSCHED_PARTITIONS is 2"):
            await prod.send("jobs.submitted", JobSubmitted(job_id="j1", cluster="default", cpu_milli=1, memory_mib=1))


async def test_the_producer_checks_each_topic_once_and_sends(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    s = _settings(kafka_broker, 2)
    await ensure_topics(s)
    async with EventProducer(s) as prod:
        for i in range(3):
            await prod.send("jobs.submitted", JobSubmitted(job_id=f"j{i}", cluster="default", cpu_milli=1, memory_mib=1))
        await prod.flush()
        assert (prod.delivered, prod._checked) == (3, {s.topic("jobs.submitted")})


OPENB = ROOT / "tests" / "fixtures" / "traces" / "alibaba-gpu-2023"
COMMANDS = {"worker": ["worker", "--no-archive"], "agents": ["agents"],
            "replay": ["replay", "openb", "--path", str(OPENB), "--speed", "0", "--no-progress"]}  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_commands_say_so_in_one_line(kafka_broker, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    s = _settings(kafka_broker, 2)
    asyncio.run(ensure_topics(s))
    env = {**os.environ, "SEMSCHED_BOOTSTRAP": s.bootstrap, "SEMSCHED_TOPIC_PREFIX": s.topic_prefix,
           "SEMSCHED_PARTITIONS": "3", "SEMSCHED_STATE_DIR": str(tmp_path), "SEMSCHED_WEB_PORT": "0", "COLUMNS": "400"}  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "ops.cli.main", *COMMANDS[command]], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == (2 if command == "replay" else 1), r.stderr[-2000:]
    head = "error:" if command == "replay" else f"semsched {command}:"
    [line] = [x for x in r.stderr.splitlines() if x.startswith(head)]
    assert "SEMSCHED_PARTITIONS is 3" in line and "(2) and " in line and "set SEMSCHED_PARTITIONS=2" in line
    assert "Traceback" not in r.stderr


def test_a_worker_whose_topics_the_broker_refuses_says_so_in_one_line(kafka_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "SEMSCHED_BOOTSTRAP": kafka_broker.bootstrap, "SEMSCHED_TOPIC_PREFIX": f"r{uuid.uuid4().hex[:8]}.",
           "SEMSCHED_REPLICATION_FACTOR": "3", "SEMSCHED_STATE_DIR": str(tmp_path), "SEMSCHED_WEB_PORT": "0"}  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "ops.cli.main", *COMMANDS["worker"]], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 1, r.stderr[-2000:]
    [line] = [x for x in r.stderr.splitlines() if x.startswith("semsched worker:")]
    assert "the broker refused to create" in line and "replication factor of 3" in line and "Traceback" not in r.stderr
