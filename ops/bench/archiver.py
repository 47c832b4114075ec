"""``semsched bench archiver``: what the archiver's event loop spends on a steady stream.

Inside a worker the archiver (:mod:`streams.archiver`) shares the event-loop thread with the
ingest streams and the scheduling steps, so every CPU second it takes is one they lose. This
benchmark publishes openb pods on ``jobs.submitted`` at a steady ``rate`` for ``seconds``
(as a cluster's producers would: one at a time, not in a burst), runs an archiver on its own
thread and event loop (one chdb archive for the runs, all six topics subscribed as in the worker),
and measures that thread's CPU time from its start until it has written every event. Once
per fetch setting, each on topics of its own:

- **semsched's**: the broker holds a fetch until ``FETCH_MIN_BYTES`` have arrived or
  ``settings.archive_fetch_wait_ms`` have passed;
- **Kafka's defaults**: 1 byte, 500 ms: a fetch returns as soon as any record lands.

Each run then counts its pods in the archive (distinct events, by job id); the benchmark exits 1 if
that is not exactly the number sent, and 2 if the archiver fails or does not write them in time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from ops.bench import show_and_write
from ops.console import wide_console
from storage.client import ArchiveClient
from streams.archiver import FETCH_MIN_BYTES, Archiver
from streams.settings import Settings

console = wide_console()

SETUPS = {"semsched": FETCH_MIN_BYTES, "kafka defaults": 1}  # name -> fetch_min_bytes
KAFKA_DEFAULT_WAIT_MS = 500


class _ArchiverThread(threading.Thread):
    """An archiver on its own thread and event loop; ``cpu_s`` is that thread's CPU time from
    after :meth:`Archiver.start` until ``expected`` events were consumed and written."""

    def __init__(self, settings: Settings, fetch_min_bytes: int, client: ArchiveClient) -> None:
        super().__init__(name="bench-archiver", daemon=True)
        self.settings, self.fetch_min_bytes, self.client = settings, fetch_min_bytes, client
        self.expected: int | None = None  # set once every event is sent
        self.started = threading.Event()
        self.stop = threading.Event()  # the caller gave up: stop without measuring
        self.cpu_s = 0.0
        self.archived = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            self.error = e
            self.started.set()

    async def _main(self) -> None:
        archiver = Archiver(self.settings, client=self.client, fetch_min_bytes=self.fetch_min_bytes)
        await archiver.start()
        t0 = time.thread_time()
        self.started.set()
        task = asyncio.create_task(archiver.run())
        try:
            while self.expected is None or sum(archiver.stats.archived.values()) < self.expected:
                if self.stop.is_set():
                    return
                if task.done():
                    task.result()  # its error, if it failed
                await asyncio.sleep(0.05)
            self.cpu_s = time.thread_time() - t0
            self.archived = sum(archiver.stats.archived.values())
        finally:
            await archiver.stop()
            await task


async def _publish(settings: Settings, events: list[Any], rate: float) -> float:
    """Send ``events`` at ``rate`` a second, each stamped when sent; the seconds it took."""
    from streams.producer import EventProducer

    async with EventProducer(settings) as p:
        t0 = time.time()
        for i, ev in enumerate(events):
            if (ahead := t0 + i / rate - time.time()) > 0:
                await asyncio.sleep(ahead)
            await p.send("jobs.submitted", ev.model_copy(update={"event_time": datetime.now(UTC)}))
        await p.flush()
        return time.time() - t0


def measure(settings: Settings, events: list[Any], rate: float, fetch_min_bytes: int, client: ArchiveClient,
            prefix: str, timeout_s: float = 300.0) -> dict[str, Any]:  # fmt: skip
    """One run on the broker of ``settings`` (its topics exist, with nothing on them yet): the
    archiver thread's CPU, what it wrote (its count), and the submissions in the archive whose job
    ids start with ``prefix`` (distinct events; every event's job id must, and no other run's). Raises if
    the archiver fails or has not written them within ``timeout_s``; the thread is stopped either way."""
    from storage.queries.bench_pipeline import SUBMITTED_WITH_PREFIX

    if not all(e.job_id.startswith(prefix) for e in events):
        raise ValueError(f"every job id of a run must start with {prefix!r}")
    worker = _ArchiverThread(settings, fetch_min_bytes, client)
    worker.start()
    try:
        if not worker.started.wait(120) or worker.error is not None:
            raise RuntimeError(f"the archiver did not start: {worker.error}")
        sent_s = asyncio.run(_publish(settings, events, rate))
        worker.expected = len(events)
        worker.join(timeout_s)
        if worker.is_alive() or worker.error is not None:
            raise RuntimeError(f"the archiver did not write the {len(events):,} events within {timeout_s:g} s: "
                               f"{worker.error or 'still running'}")  # fmt: skip
    finally:
        worker.stop.set()
        worker.join(60)
    _, [(in_archive,)] = client.query_rows(SUBMITTED_WITH_PREFIX, {"prefix": prefix})
    return {"events": len(events), "archived": worker.archived, "in_archive": int(in_archive), "send_s": sent_s,
            "cpu_s": worker.cpu_s, "cpu_ms_per_1000": worker.cpu_s * 1e6 / len(events)}  # fmt: skip


def run_archiver_bench(*, rate: float, seconds: float, port: int, out: Path | None, state_root: Path | None = None,
                       command: str = "semsched bench archiver") -> int:  # fmt: skip
    from ops.bench.pipeline import unique_submissions
    from ops.local_stack import LocalStack, StackBusy
    from ops.traces.registry import get_loader
    from storage.client import close_client, get_client
    from streams.topics import ensure_topics

    try:
        stack = LocalStack.fresh("bench-archiver", port=port, state_root=state_root)
    except StackBusy as e:
        console.print(f"[red]bench archiver cannot start:[/] {escape(str(e))}")
        return 2
    dsn = f"chdb://{stack.run_dir / 'chdb'}"
    rows: list[dict[str, Any]] = []
    try:
        with console.status("starting the Kafka broker…"):
            stack.start_broker()
        trace = get_loader("openb").load_jobs()
        client = get_client(dsn)
        n = max(1, int(rate * seconds))
        for name, min_bytes in SETUPS.items():
            wait = stack.settings.archive_fetch_wait_ms if min_bytes == FETCH_MIN_BYTES else KAFKA_DEFAULT_WAIT_MS
            # topics of its own: the runs' archivers read from the earliest offset
            settings = stack.settings.model_copy(update={"archive_fetch_wait_ms": wait,
                                                         "topic_prefix": f"semsched.bench{len(rows)}."})  # fmt: skip
            asyncio.run(ensure_topics(settings))
            prefix = f"r{len(rows)}-"
            pods = [e.model_copy(update={"job_id": prefix + e.job_id}) for e in unique_submissions(trace, n)]
            with console.status(f"{name}: {n:,} openb pods at {rate:g}/s…"):
                r = measure(settings, pods, rate, min_bytes, client, prefix)
            rows.append({"fetch": name, "fetch_min_bytes": min_bytes, "fetch_max_wait_ms": wait, **r})
    except Exception as e:  # noqa: BLE001 - report, stop what was started
        console.print(f"[red]bench failed:[/] {escape(str(e))}")
        return 2
    finally:
        close_client(dsn)
        stack.stop()
    t = Table(title=f"archiver event loop: {rate:g} openb pods/s for {seconds:g} s (all six topics subscribed)")
    for col in ("fetch (min bytes, max wait)", "events sent", "in the archive", "CPU s", "CPU ms per 1,000 events"):
        t.add_column(col, justify="left" if col.startswith("fetch") else "right")
    for r in rows:
        t.add_row(f"{r['fetch']} ({r['fetch_min_bytes']:,} B, {r['fetch_max_wait_ms']} ms)", f"{r['events']:,}",
                  f"{r['in_archive']:,}", f"{r['cpu_s']:.2f}", f"{r['cpu_ms_per_1000']:,.0f}")  # fmt: skip
    note = ("CPU = the archiver thread's own time (decoding, buffering, fetching; not chdb's threads), from its start "
            "until it had written every event sent. In a worker that thread is the event loop the streams and the "
            "scheduling steps run on.")  # fmt: skip
    show_and_write(console, t, note, out, "archiver", {"command": command, "rate": rate, "seconds": seconds, "rows": rows})
    lost = [r["fetch"] for r in rows if r["in_archive"] != r["events"]]
    if lost:
        console.print(f"[red]the archive does not hold exactly the events sent: {', '.join(lost)}[/]")
    return 1 if lost else 0
