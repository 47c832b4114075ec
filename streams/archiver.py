"""The archiver: every event on every topic → ClickHouse, in column-wise batches.

An Armada-style sink. One aiokafka consumer (group ``<prefix>archiver``, manual commits,
``auto_offset_reset=earliest``) reads all six topics. Each message is decoded with
:func:`scheduling.events.decode` and buffered for its table (one table per topic). A
table's buffer is flushed — one Arrow insert — when it reaches
``settings.archive_batch_rows`` rows or ``settings.archive_flush_s`` after its first row.

Offsets: a topic's partitions are committed only after every message read from them has
been written (topic ↔ table is one-to-one, so writing what a table's buffer holds makes every
offset of its topic consumed until then safe; rows taken while that write is in flight stay
buffered, and their offsets uncommitted, until the next flush). A failed write is retried with capped exponential
backoff and nothing is committed past it; after a crash the uncommitted tail is re-read
and re-written, and the ``ReplacingMergeTree`` tables (``FINAL`` reads) count it once. A row
its table cannot hold never fails a write: the writer (:mod:`storage.writer`) writes the rest of
the batch and puts that row in the ``deadletter`` table with the reason.

A message the worker refuses on the message alone (:func:`streams.admission.admit`: empty,
over the size limit, not a valid event, on another partition than its cluster's) is not
archived into the event tables: the ingest path dead-letters it, and the dead letter itself
arrives on the ``deadletter`` topic and is archived there. It is counted in ``undecodable``
and its offset committed with its topic's next flush.

Telemetry: each batch write is an ``archive write`` span linked to the records of the batch
that carried a trace context in their headers (capped by ``OTEL_SPAN_LINK_COUNT_LIMIT``), and
:meth:`Archiver.lag_snapshot` feeds the ``semsched.archive.lag`` gauges.

Runs as a task inside the Faust worker (which owns the chdb directory) or standalone::

    archiver = Archiver(settings)
    await archiver.start()
    task = asyncio.create_task(archiver.run())
    ...
    await archiver.stop()  # final flush + commit
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from opentelemetry.trace import SpanContext

from scheduling.events import Event
from storage.client import ArchiveClient, get_client
from storage.migrate import migrate
from storage.rows import TOPIC_TABLES
from storage.writer import ArchiveWriter
from streams import telemetry
from streams.admission import admit
from streams.archive_offsets import ArchiveOffsets
from streams.settings import TOPICS, Settings
from streams.telemetry.metrics import ARCHIVES

log = logging.getLogger(__name__)

FETCH_MIN_BYTES = 256 * 1024  # what a fetch waits for (up to settings.archive_fetch_wait_ms)


@dataclass
class _Buffer:
    events: list[Event] = field(default_factory=list)
    positions: list[tuple[int, int]] = field(default_factory=list)
    first_at: float | None = None  # monotonic time of the first buffered row
    links: list[SpanContext] = field(default_factory=list)  # trace contexts of the buffered records


@dataclass
class ArchiverStats:
    """Counters, readable at any time (``Archiver.stats``)."""

    archived: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOPIC_TABLES.values(), 0))
    consumed: int = 0
    undecodable: int = 0
    flushes: int = 0
    write_failures: int = 0
    commits: int = 0
    lag: dict[str, int] = field(default_factory=dict)  # "topic:partition" → messages behind

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, archiver: Archiver) -> None:
        self.archiver = archiver

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # write and commit what we hold before the partitions move to another member
        if revoked:
            await self.archiver.flush_all(retry_for_s=self.archiver.settings.archive_flush_s * 10)
            self.archiver.forget(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        return None


class Archiver:
    """Consumes every topic and archives it; see the module docstring for the guarantees."""

    def __init__(
        self,
        settings: Settings,
        client: ArchiveClient | None = None,
        *,
        group_id: str | None = None,
        poll_ms: int = 200,
        max_backoff_s: float = 5.0,
        stop_timeout_s: float = 30.0,
        fetch_min_bytes: int = FETCH_MIN_BYTES,
    ) -> None:
        self.settings = settings
        self.client = client
        self.group_id = group_id or f"{settings.topic_prefix}archiver"
        self.poll_ms = poll_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.max_backoff_s = max_backoff_s
        self.stop_timeout_s = stop_timeout_s
        self.stats = ArchiverStats()
        self._by_full = {settings.topic(t): t for t in TOPICS}
        self._buffers: dict[str, _Buffer] = {TOPIC_TABLES[t]: _Buffer() for t in TOPICS}
        self._offsets = ArchiveOffsets(lambda tp: TOPIC_TABLES[self._by_full[tp.topic]])
        self._consumer: AIOKafkaConsumer | None = None
        self._writer: ArchiveWriter | None = None
        self._stopping = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self._last_skip_commit = 0.0
        ARCHIVES.add(self)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the archive (migrating it) and join the consumer group."""
        if self.client is None:
            self.client = get_client(self.settings.clickhouse_dsn)
        await asyncio.to_thread(migrate, self.client)
        self._writer = ArchiveWriter(self.client)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=max(self.settings.max_message_bytes * 4, 1024 * 1024),
            # a sink that writes once a second need not fetch as each record lands: the broker holds
            # a fetch until this much data or the wait is up (the worker's own consumer keeps Faust's
            # settings, for latency). At 300 events a second, fetching as they landed took the
            # archiver's event loop eight times the CPU (`semsched bench archiver`).
            fetch_min_bytes=self.fetch_min_bytes,
            fetch_max_wait_ms=self.settings.archive_fetch_wait_ms,
        )
        self._consumer.subscribe(list(self._by_full), listener=_Rebalance(self))
        await self._consumer.start()

    async def run(self) -> None:
        """Consume, buffer, flush and commit until :meth:`stop`."""
        assert self._consumer is not None, "call start() first"
        while not self._stopping.is_set():
            batches = await self._consumer.getmany(
                timeout_ms=self.poll_ms, max_records=self.settings.archive_batch_rows
            )
            for tp, records in batches.items():
                self._take(tp, records)
            await self._flush_due()
            await self._update_lag()

    async def run_until_caught_up(self, idle_polls: int = 3, unknown_end_s: float = 30.0) -> int:
        """Archive until every assigned partition has no lag for ``idle_polls`` polls in a
        row, then flush and commit. Returns the rows written (the demo's final drain). A partition
        whose end the broker has not said yet (no fetch answered) is not caught up: three empty
        polls before the first answer ended the drain with nothing read. After ``unknown_end_s`` of
        that, the drain ends as before (a partition the broker never answers for)."""
        assert self._consumer is not None, "call start() first"
        before = sum(self.stats.archived.values())
        idle, started = 0, time.monotonic()
        while idle < idle_polls:
            batches = await self._consumer.getmany(timeout_ms=self.poll_ms,
                                                   max_records=self.settings.archive_batch_rows)  # fmt: skip
            for tp, records in batches.items():
                self._take(tp, records)
            await self._flush_due()
            await self._update_lag()
            assigned = self._consumer.assignment()
            ends_known = all(self._consumer.highwater(tp) is not None for tp in assigned) \
                or time.monotonic() - started > unknown_end_s
            quiet = not batches and bool(assigned) and ends_known and not any(self.stats.lag.values())
            idle = idle + 1 if quiet else 0
        await self.flush_all()
        return sum(self.stats.archived.values()) - before

    async def query(self, sql: str, encode: Callable[[list[str], list[tuple[Any, ...]]], Any] | None = None,
                    limits: dict[str, Any] | None = None) -> Any:  # fmt: skip
        """Run one analyst query on the archive this process owns, within ``limits`` (:func:`storage.queries.run_sql`'s
        ``timeout_s`` and ``max_rows``; default the worker's, :data:`storage.queries.WORKER_SQL_LIMITS`):
        ``(columns, rows)``, or ``encode(columns, rows)``
        computed in the same thread (the answer's JSON: found by review, encoding 2 million rows held
        the event loop 14 s). Not behind the flush lock: a flush retrying while the archive is unwritable
        holds it (found by review: a query waited as long as writes failed); the client serialises its
        calls itself (:mod:`storage.client`)."""
        from storage.queries import WORKER_SQL_LIMITS, run_sql

        if self.client is None:
            raise RuntimeError("the archiver has not started")
        client = self.client

        def answer() -> Any:
            cols, rows = run_sql(client, sql, **(WORKER_SQL_LIMITS if limits is None else limits))
            return (cols, rows) if encode is None else encode(cols, rows)

        return await asyncio.to_thread(answer)

    async def stop(self) -> None:
        """Stop consuming, flush every buffer and commit, then leave the group. If the
        archive stays unwritable for ``stop_timeout_s``, leave WITHOUT committing the
        unwritten tail (it is re-read on the next start)."""
        self._stopping.set()
        if self._consumer is None:
            return
        try:
            await self.flush_all(retry_for_s=self.stop_timeout_s)
        finally:
            await self._consumer.stop()
            self._consumer = None

    # ------------------------------------------------------------------ internals

    def _take(self, tp: TopicPartition, records: list[Any]) -> None:
        topic = self._by_full[tp.topic]
        buf = self._buffers[TOPIC_TABLES[topic]]
        traced = telemetry.configured() is not None
        for rec in records:
            self.stats.consumed += 1
            self._offsets.read(tp, rec.offset)
            event = admit(rec.value, topic, tp.partition, self.settings, offset=rec.offset, timestamp_ms=rec.timestamp)
            if isinstance(event, str):  # the worker dead-letters it (and the dead letter is archived)
                self.stats.undecodable += 1
                # ... except on the deadletter topic itself, which no one else reads: said here, loudly
                (log.warning if topic == "deadletter" else log.debug)(
                    "archiver: refused %s[%d]@%d: %s", tp.topic, tp.partition, rec.offset, event)  # fmt: skip
                continue
            if buf.first_at is None:
                buf.first_at = time.monotonic()
            buf.events.append(event)
            buf.positions.append((tp.partition, rec.offset))
            if traced and rec.headers and (sc := telemetry.span_context(rec.headers)) is not None:
                buf.links.append(sc)

    def _due(self, table: str, now: float) -> bool:
        buf = self._buffers[table]
        if not buf.events:
            return False
        return len(buf.events) >= self.settings.archive_batch_rows or (
            buf.first_at is not None and now - buf.first_at >= self.settings.archive_flush_s
        )

    async def _flush_due(self) -> None:
        now = time.monotonic()
        commit_skips = now - self._last_skip_commit >= self.settings.archive_flush_s
        if commit_skips:
            self._last_skip_commit = now
        for table in self._buffers:
            if self._due(table, now):
                await self._flush(table, retry_for_s=None)
            elif commit_skips and not self._buffers[table].events:
                # nothing buffered (rows being written stay buffered until written): whatever was
                # consumed from this topic is written or undecodable, so its offsets may be committed
                await self._commit(self._offsets.of_table(table))

    def started(self) -> bool:
        """Whether the archive is open and migrated (:meth:`start`): until then nothing is buffered,
        written, or answered."""
        return self._writer is not None

    async def flush_all(self, retry_for_s: float | None = None) -> bool:
        """Flush every table and commit; True if every buffer was written (a commit that failed after
        the write is not counted against it: those rows are read and written again, and collapse onto
        their key; rows taken meanwhile wait for the next flush).
        ``retry_for_s`` bounds the whole call (each table's flush gets what is left; a table
        reached after the deadline still gets one write if the lock is free)."""
        if not self.started():  # (found by a chaos run: a flush asked of a restarted worker failed an assertion)
            return False
        deadline = None if retry_for_s is None else time.monotonic() + retry_for_s
        ok = True
        for table in self._buffers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = await self._flush(table, retry_for_s=left) and ok
        return ok

    async def _flush(self, table: str, retry_for_s: float | None) -> bool:
        """Write ``table``'s buffer (retrying with backoff; forever if ``retry_for_s`` is None
        and we are not stopping), then commit its topic's offsets up to what was written.

        ``run()`` may take records into the buffer while the write is in flight (a flush from the
        worker's ``/sql?flush=1`` or a rebalance runs beside it on the event loop): the rows
        written and the offsets committed are the ones the buffer held when the write began, and
        the rows taken since stay buffered for the next flush. (Clearing the whole buffer after
        the write and committing every consumed offset lost those rows for good.)

        ``retry_for_s`` also bounds the wait for another flush (``run()``'s retries forever while
        the archive is unwritable): a caller with a deadline gets False, not a wait without end."""
        deadline = None if retry_for_s is None else time.monotonic() + retry_for_s
        if retry_for_s is None or not self._flush_lock.locked():
            await self._flush_lock.acquire()  # (free: taken at once, whatever the deadline)
        else:
            try:
                await asyncio.wait_for(self._flush_lock.acquire(), retry_for_s)
            except TimeoutError:
                return False
        try:
            return await self._flush_held(table, deadline)
        finally:
            self._flush_lock.release()

    async def _flush_held(self, table: str, deadline: float | None) -> bool:
        """:meth:`_flush` with the flush lock held."""
        buf = self._buffers[table]
        assert self._writer is not None
        upto = self._offsets.of_table(table)  # with the rows below: nothing awaits between the two
        if buf.events:
            events, positions, links = list(buf.events), list(buf.positions), list(buf.links)
            delay = 0.05
            with telemetry.archive_span(table, len(events), links) as span:
                while True:
                    try:
                        n = await asyncio.to_thread(self._writer.write, table, events, positions)
                        break
                    except Exception as e:  # noqa: BLE001 - any write failure is retried
                        self.stats.write_failures += 1
                        span.add_event("write failed", {"error": f"{type(e).__name__}: {e}"[:500]})
                        log.warning("archiver: writing %d rows to %s failed (%s); retrying in %.2fs",
                                    len(events), table, e, delay)  # fmt: skip
                        if deadline is not None and time.monotonic() + delay > deadline:
                            return False
                        if deadline is None and self._stopping.is_set():
                            return False  # stop() takes over with its own deadline
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, self.max_backoff_s)
            self.stats.archived[table] += n
            self.stats.flushes += 1
            del buf.events[: len(events)], buf.positions[: len(positions)], buf.links[: len(links)]
            if not buf.events:
                buf.first_at = None  # (rows taken during the write keep the older time: due at once)
        await self._commit(upto)
        return True

    async def _commit(self, upto: dict[TopicPartition, int]) -> None:
        """Commit ``upto`` (one topic's partitions, all written or undecodable): :meth:`ArchiveOffsets.commit`."""
        if await self._offsets.commit(self._consumer, upto):
            self.stats.commits += 1

    def forget(self, revoked: Any) -> None:
        """Partitions another member owns now (:meth:`ArchiveOffsets.forget`)."""
        self._offsets.forget(revoked)

    async def _update_lag(self) -> None:
        c = self._consumer
        if c is None:
            return
        lag: dict[str, int] = {}
        for tp in c.assignment():
            high = c.highwater(tp)
            if high is None:
                continue
            with contextlib.suppress(Exception):
                lag[f"{tp.topic}:{tp.partition}"] = max(0, high - await c.position(tp))
        self.stats.lag = lag

    # ------------------------------------------------------------------ helpers

    def lag_snapshot(self) -> tuple[int, int, float]:
        """(messages on the topics not read yet, rows read but not written, age in seconds of
        the oldest unwritten row): the ``semsched.archive.lag`` gauges, read from the metric
        reader's thread (a replaced dict and list lengths only)."""
        now = time.monotonic()
        bufs = list(self._buffers.values())
        ages = [now - b.first_at for b in bufs if b.first_at is not None and b.events]
        return self.stats.total_lag, sum(len(b.events) for b in bufs), max(ages, default=0.0)

    @property
    def buffered(self) -> dict[str, int]:
        """Rows waiting per table."""
        return {t: len(b.events) for t, b in self._buffers.items()}

    async def committed(self) -> dict[TopicPartition, int | None]:
        """The group's committed offset per assigned partition (for tests and ``semsched``)."""
        assert self._consumer is not None
        return {tp: await self._consumer.committed(tp) for tp in self._consumer.assignment()}


async def archive_catch_up(settings: Settings) -> int:
    """Run an archiver until it has written everything on the topics now; rows written. It
    fetches as records land (a drain gains nothing from fuller fetches, and its idle polls must
    not pass while a fetch is held at the broker)."""
    archiver = Archiver(settings, fetch_min_bytes=1)
    await archiver.start()
    try:
        return await archiver.run_until_caught_up()
    finally:
        await archiver.stop()
