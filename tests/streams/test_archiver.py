"""The archiver against a real Kafka broker and an embedded chdb archive."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from scheduling.events import (
    DeadLetter,
    DecisionRecord,
    Event,
    IsolateNodeCommand,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    PlacementCommand,
    partition_for,
)
from storage.client import ArchiveClient
from storage.rows import TOPIC_TABLES
from streams.archiver import Archiver
from streams.producer import EventProducer
from streams.settings import TOPICS, Settings
from streams.topics import ensure_topics

pytestmark = pytest.mark.integration


def _settings(bootstrap: str, tmp_path: Path) -> Settings:
    return Settings(bootstrap=bootstrap, topic_prefix=f"arch{uuid.uuid4().hex[:8]}.", partitions=2,
                    state_dir=tmp_path, archive_batch_rows=40, archive_flush_s=0.2)  # fmt: skip


def _events(n_jobs: int) -> list[tuple[str, Event]]:
    out: list[tuple[str, Event]] = []
    for i in range(n_jobs):
        cluster = f"c{i % 3}"
        out.append(("jobs.submitted", JobSubmitted(job_id=f"j{i}", cluster=cluster)))
        out.append(
            (
                "nodes.telemetry",
                NodeTelemetry(node_id=f"n{i}", cluster=cluster, cpu_milli=1000, memory_mib=100),
            )
        )
        out.append(
            (
                "decisions",
                DecisionRecord(
                    decision_id=f"d{i}",
                    event_id=f"d{i}",
                    job_id=f"j{i}",
                    cluster=cluster,
                    outcome="placed",
                    node_id=f"n{i}",
                    policy="best-fit",
                    latency_ms=1.0,
                ),
            )
        )
        out.append(
            (
                "actions",
                PlacementCommand(
                    decision_id=f"d{i}", job_id=f"j{i}", cluster=cluster, node_id=f"n{i}", policy="best-fit"
                ),
            )
        )
        out.append(
            (
                "jobs.lifecycle",
                JobLifecycle(job_id=f"j{i}", cluster=cluster, decision_id="d", state="started", node_id=f"n{i}"),
            )
        )
        if i % 10 == 0:
            out.append(
                (
                    "actions",
                    IsolateNodeCommand(decision_id=f"iso{i}", cluster=cluster, node_id=f"n{i}", reason="xid"),
                )
            )
            out.append(("deadletter", DeadLetter.of(b"\xffjunk", "bad json", topic="jobs.submitted")))
    return out  # fmt: skip


async def _publish(settings: Settings, events: list[tuple[str, Event]], junk: int = 0, refused: int = 0) -> None:
    await ensure_topics(settings)
    async with EventProducer(settings) as p:
        for topic, e in events:
            await p.send(topic, e)
        for k in range(junk):  # not decodable: counted, not archived, offsets still committed
            await p.send_raw("jobs.submitted", b"{oops", key=None, cluster=f"c{k}")
        for k in range(refused):  # valid events the worker refuses: on another partition than their
            # cluster's, or over the size limit; not archived as submitted either
            ev = JobSubmitted(job_id=f"refused{k}", cluster="c0",
                              labels={"blob": "x" * (settings.max_message_bytes if k % 2 else 1)})
            other = next(c for c in (f"c{i}" for i in range(1, 9)) if partition_for(c, 2) != partition_for("c0", 2))
            await p.send_raw("jobs.submitted", ev.to_bytes(), key=None, cluster="c0" if k % 2 else other)
        await p.flush()


async def _committed(
    settings: Settings, group: str
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(committed offset, end offset) per partition of every topic, for ``group``."""
    c = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(settings.topic(t), p) for t in TOPICS for p in range(settings.partitions)]
        ends = await c.end_offsets(tps)
        committed = {tp: (await c.committed(tp)) or 0 for tp in tps}
        return committed, ends
    finally:
        await c.stop()


def _rows(client: ArchiveClient) -> dict[str, int]:
    out = {}
    for t in TOPIC_TABLES.values():
        _, [(n,)] = client.query_rows(f"SELECT count() FROM {t}")
        out[t] = int(n)
    return out


def _expected(events: list[tuple[str, Event]]) -> dict[str, int]:
    want = dict.fromkeys(TOPIC_TABLES.values(), 0)
    for topic, _ in events:
        want[TOPIC_TABLES[topic]] += 1
    return want


@contextlib.asynccontextmanager
async def _running(settings: Settings, client: Any, **kw: Any) -> AsyncIterator[Archiver]:
    """An archiver started and running on ``client``; stopped (and its loop awaited) on exit."""
    arch = Archiver(settings, client=client, **kw)
    await arch.start()
    task = asyncio.create_task(arch.run())
    try:
        yield arch
    finally:
        await arch.stop()
        await task


async def _wait(cond, timeout: float = 60.0) -> None:  # noqa: ANN001
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.05)


async def test_the_consumer_waits_for_fuller_fetches_and_a_drain_does_not(kafka_broker, chdb_archive: ArchiveClient,
                                                                          tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """The fetch setting reaches aiokafka (``semsched bench archiver`` measures what it saves); the
    demo's final drain (``archive_catch_up``) runs an archiver whose fetches are answered at once."""
    from streams import archiver as archiver_module
    from streams.archiver import FETCH_MIN_BYTES

    settings = _settings(kafka_broker.bootstrap, tmp_path).model_copy(update={"archive_fetch_wait_ms": 123})
    await ensure_topics(settings)
    arch = Archiver(settings, client=chdb_archive)
    await arch.start()
    try:
        assert arch._consumer is not None
        assert (arch._consumer._fetch_min_bytes, arch._consumer._fetch_max_wait_ms) == (FETCH_MIN_BYTES, 123)
    finally:
        await arch.stop()

    drains: list[int] = []

    class Recorded(Archiver):
        async def start(self) -> None:
            await super().start()
            assert self._consumer is not None
            drains.append(self._consumer._fetch_min_bytes)

    monkeypatch.setattr(archiver_module, "Archiver", Recorded)
    assert await archiver_module.archive_catch_up(settings) == 0  # nothing on the topics
    assert drains == [1]


async def test_archives_every_event_once_and_commits(
    kafka_broker, chdb_archive: ArchiveClient, tmp_path: Path
) -> None:  # noqa: ANN001
    settings = _settings(kafka_broker.bootstrap, tmp_path)
    events = _events(60)
    await _publish(settings, events, junk=3, refused=2)
    async with _running(settings, chdb_archive) as arch:
        await _wait(lambda: arch.stats.consumed == len(events) + 5)
        await _wait(lambda: sum(arch.stats.archived.values()) == len(events))
    assert arch.stats.undecodable == 5
    assert _rows(chdb_archive) == _expected(events)  # exactly N: no duplicates, nothing lost, nothing refused
    committed, ends = await _committed(settings, arch.group_id)
    assert committed == ends
    assert sum(ends.values()) == len(events) + 5


class FlakyClient:
    """A real chdb client whose inserts fail while ``failing`` is set."""

    def __init__(self, inner: ArchiveClient) -> None:
        self.inner = inner
        self.dsn, self.kind = inner.dsn, inner.kind
        self.failing = True
        self.failures = 0

    def command(self, sql: str, parameters=None) -> None:  # noqa: ANN001
        self.inner.command(sql, parameters)

    def query_arrow(self, sql: str, parameters=None) -> pa.Table:  # noqa: ANN001
        return self.inner.query_arrow(sql, parameters)

    def query_rows(self, sql: str, parameters=None, settings=None):  # noqa: ANN001, ANN201
        return self.inner.query_rows(sql, parameters, settings)

    def insert_arrow(self, table: str, data: pa.Table) -> int:
        if self.failing and table != "schema_migrations":
            self.failures += 1
            raise ConnectionError("archive unavailable")
        return self.inner.insert_arrow(table, data)

    def close(self) -> None:
        self.inner.close()


class SlowClient(FlakyClient):
    """A real chdb client whose inserts take ``delay`` seconds (a loaded machine's insert)."""

    def __init__(self, inner: ArchiveClient, delay: float) -> None:
        super().__init__(inner)
        self.failing, self.delay = False, delay
        self.consumed: Callable[[], int] = lambda: 0
        self.overlapped = 0  # writes during which the archiver took more records

    def insert_arrow(self, table: str, data: pa.Table) -> int:
        if table != "schema_migrations":
            before = self.consumed()
            time.sleep(self.delay)
            self.overlapped += self.consumed() > before
        return self.inner.insert_arrow(table, data)


async def test_a_flush_beside_the_consumer_loses_nothing(kafka_broker, chdb_archive: ArchiveClient,  # noqa: ANN001
                                                         tmp_path: Path) -> None:  # fmt: skip
    """The worker's ``/sql?flush=1`` flushes the archiver from the web handler while ``run()`` keeps
    taking records: the rows taken during that write were dropped with the buffer and their offsets
    committed (decisions missing from the archive with the lag at 0, seen in the two-worker test)."""
    settings = _settings(kafka_broker.bootstrap, tmp_path)
    events = _events(60)
    await ensure_topics(settings)
    # records fetched as they land, so that run() takes some while a flush's write is in flight
    slow = SlowClient(chdb_archive, 0.1)
    stop_flushing = asyncio.Event()
    async with _running(settings, slow, poll_ms=20, fetch_min_bytes=1) as arch:
        slow.consumed = lambda: arch.stats.consumed

        async def flush_like_the_web_handler() -> None:  # the two-worker test polled /sql?flush=1 every 0.5 s
            while not stop_flushing.is_set():
                await arch.flush_all()
                await asyncio.sleep(0.05)

        flusher = asyncio.create_task(flush_like_the_web_handler())
        try:
            async with EventProducer(settings) as producer:  # a trickle, as the workers publish
                for i, (topic, e) in enumerate(events):
                    await producer.send(topic, e)
                    if i % 4 == 3:
                        await producer.flush()
                        await asyncio.sleep(0.01)
                await producer.flush()
            await _wait(lambda: arch.stats.consumed == len(events))
            stop_flushing.set()
            await flusher
            assert await arch.flush_all()  # what is still buffered
        finally:
            stop_flushing.set()
            await flusher
    assert slow.overlapped > 0, "no write overlapped the consumer's loop: the race was not exercised"
    assert _rows(chdb_archive) == _expected(events)  # every row written (before the fix 1-13 a table went missing here)
    committed, ends = await _committed(settings, arch.group_id)
    assert committed == ends


async def test_write_failure_never_commits_past_unwritten(
    kafka_broker,
    chdb_archive: ArchiveClient,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    settings = _settings(kafka_broker.bootstrap, tmp_path)
    events = _events(30)
    await _publish(settings, events)
    flaky = FlakyClient(chdb_archive)
    async with _running(settings, flaky, max_backoff_s=0.2) as arch:
        await _wait(lambda: arch.stats.consumed == len(events))
        await _wait(lambda: flaky.failures >= 3)
        committed, _ = await _committed(settings, arch.group_id)
        assert sum(committed.values()) == 0, "committed offsets past data that was never written"
        assert sum(_rows(chdb_archive).values()) == 0
        flaky.failing = False  # the archive comes back
        await _wait(lambda: sum(arch.stats.archived.values()) == len(events))
    assert arch.stats.write_failures >= 3
    assert _rows(chdb_archive) == _expected(events)
    committed, ends = await _committed(settings, arch.group_id)
    assert committed == ends


async def test_stop_while_unwritable_does_not_commit(
    kafka_broker,
    chdb_archive: ArchiveClient,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    settings = _settings(kafka_broker.bootstrap, tmp_path)
    events = _events(5)
    await _publish(settings, events)
    flaky = FlakyClient(chdb_archive)
    arch = Archiver(settings, client=flaky, max_backoff_s=0.1, stop_timeout_s=0.5)  # type: ignore[arg-type]
    await arch.start()
    task = asyncio.create_task(arch.run())
    await _wait(lambda: arch.stats.consumed == len(events) and flaky.failures >= 1)
    await arch.stop()
    await task
    committed, _ = await _committed(settings, arch.group_id)
    assert sum(committed.values()) == 0
    # a restarted archiver (same group) re-reads and writes everything exactly once
    async with _running(settings, chdb_archive) as arch2:
        await _wait(lambda: sum(arch2.stats.archived.values()) == len(events))
    assert _rows(chdb_archive) == _expected(events)


async def test_commits_only_move_forward(kafka_broker, chdb_archive: ArchiveClient, tmp_path: Path) -> None:  # noqa: ANN001
    """A flush's commit and the empty-buffer one can be in flight together; an older snapshot landing
    last moved the group back."""
    settings = _settings(kafka_broker.bootstrap, tmp_path)
    events = _events(6)
    await _publish(settings, events)
    async with _running(settings, chdb_archive) as arch:
        await _wait(lambda: sum(arch.stats.archived.values()) == len(events))
        (tp, end), *_ = [(tp, e) for tp, e in (await _committed(settings, arch.group_id))[1].items() if e >= 2]
        await arch._commit({tp: end})  # noqa: SLF001
        await arch._commit({tp: end - 1})  # noqa: SLF001  (the older snapshot, last)
        assert (await _committed(settings, arch.group_id))[0][tp] == end


async def test_a_flush_with_a_deadline_does_not_wait_behind_an_unwritable_archive(
        kafka_broker, chdb_archive: ArchiveClient, tmp_path: Path) -> None:  # noqa: ANN001  # fmt: skip
    """run()'s flush retries forever while the archive is down, holding the flush lock: a
    /sql?flush=1 (bounded) or a revoke's flush waited behind it for as long as the archive was down."""
    settings = _settings(kafka_broker.bootstrap, tmp_path)
    events = _events(5)
    await _publish(settings, events)
    flaky = FlakyClient(chdb_archive)
    async with _running(settings, flaky, max_backoff_s=0.1) as arch:
        await _wait(lambda: flaky.failures >= 2)  # run() is retrying, with the lock
        loop = asyncio.get_running_loop()
        began = loop.time()
        assert await asyncio.wait_for(arch.flush_all(retry_for_s=1.5), 30) is False
        # the deadline is the whole call's (it was each table's, six of them: ~9 s); room for a loaded machine
        assert loop.time() - began < 5
        committed, _ = await _committed(settings, arch.group_id)
        assert sum(committed.values()) == 0  # nothing written, nothing committed
        # an analyst's query answers with what the archive holds (found by review: it waited behind the
        # retrying flush's lock for as long as writes failed)
        cols, rows = await asyncio.wait_for(arch.query("SELECT count() AS n FROM jobs_submitted"), 30)
        assert cols == ["n"] and rows == [(0,)]
        flaky.failing = False
        await _wait(lambda: sum(arch.stats.archived.values()) == len(events))
    assert _rows(chdb_archive) == _expected(events)
