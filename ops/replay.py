"""Trace replay: publish a trace's node inventory and its job submissions to Kafka, with the
trace's inter-arrival times scaled by ``speed``.

Order: the whole trace is parsed first (so ``strict`` fails before anything is published),
topics are ensured, every node goes to ``nodes.telemetry`` (``source="inventory"``), then
every job to ``jobs.submitted`` at ``(offset - first offset) / speed`` seconds after the
first job. ``speed`` of 0 or infinity means as fast as possible; ``max_gap_s`` caps any
single (scaled) wait, to squeeze the idle stretches of week-long traces. Pacing follows an
absolute schedule (no drift from slow sends). Each event is re-stamped with
``event_time`` = the moment it is published (what the control plane sees as the submit
time); ``event_id`` is kept when the trace gives one, else it is derived from the trace file and
the job (:func:`ops.traces.published.replay_event_id`), so a replay run again — resumed after an interruption —
publishes each job under the id it had, and the worker takes what it already accepted for a
redelivery (until 2026-12-01 each run drew new ids, and every job already sent was dead-lettered
as a reused job id).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.traces.base import TraceLineError, TraceLoader
from ops.traces.published import published, replay_source
from scheduling.events import Event
from streams.producer import EventProducer
from streams.settings import Settings
from streams.topics import ensure_topics

FIRST_ERRORS = 5


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """Real time: ``time.monotonic`` and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class Publisher(Protocol):
    async def __aenter__(self) -> Publisher: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def send(self, topic: str, event: Event, *, cluster: str | None = None) -> None: ...

    async def flush(self) -> None: ...


@dataclass
class ReplayStats:
    """What a replay published and what it left out."""

    trace: str
    nodes: int = 0
    jobs: int = 0
    skipped_lines: int = 0
    first_errors: list[TraceLineError] = field(default_factory=list)
    filtered: dict[str, int] = field(default_factory=dict)
    trace_span_s: float = 0.0
    speed: float = math.inf
    slept_s: float = 0.0
    wall_s: float = 0.0
    planned_s: float = 0.0  # when the last job is due, seconds after the first (--speed, --max-gap)

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s if self.wall_s > 0 else 0.0


def due_times(offsets: list[float], speed: float, max_gap_s: float | None) -> list[float]:
    """Seconds after the first job at which each job is due."""
    fast = speed == 0 or math.isinf(speed)
    if speed < 0 or math.isnan(speed):
        raise ValueError("speed must be > 0 (or 0 / inf for as fast as possible)")
    if max_gap_s is not None and not max_gap_s >= 0:  # (nan too)
        raise ValueError(f"max_gap must be >= 0 seconds, not {max_gap_s}")
    due, t = [], 0.0
    for i, off in enumerate(offsets):
        if i and not fast:
            gap = max(0.0, off - offsets[i - 1]) / speed
            t += gap if max_gap_s is None else min(gap, max_gap_s)
        due.append(t)
    return due


def planned_due_s(loader: TraceLoader, *, speed: float, limit: int | None = None,
                  max_gap_s: float | None = None) -> list[float]:  # fmt: skip
    """When (wall seconds after the first) a replay of ``loader`` will submit each job. Lets a
    caller refuse a replay that would idle for hours before anything happens."""
    jobs = loader.load_jobs()
    jobs = jobs if limit is None else jobs[:limit]
    return due_times([j.offset_s for j in jobs], speed, max_gap_s)


async def replay(
    loader: TraceLoader, settings: Settings, *, speed: float, limit: int | None = None, strict: bool = False,
    progress: bool = True, clock: Clock | None = None, max_gap_s: float | None = None,
    create_topics: bool = True, producer_factory: Callable[[Settings], Publisher] = EventProducer,
    inventory_published: Callable[[int], Awaitable[None]] | None = None,
) -> ReplayStats:  # fmt: skip
    """Replay ``loader`` into Kafka; see the module docstring. ``limit`` caps the jobs after
    the loader's own selection; ``strict`` raises the first bad line (:class:`TraceLineError`)
    before anything is published. ``inventory_published(nodes)`` is awaited once the nodes are
    on the broker, before the first job (the demo waits there until the worker knows them, as
    a real cluster's nodes are registered before its jobs come)."""
    clock = clock or MonotonicClock()
    started = clock.now()
    if strict:
        if loader.errors:  # parsed earlier without strict
            raise loader.errors[0]
        loader.strict = True
    selected = loader.load_jobs()
    nodes = list(loader.nodes())
    jobs = selected if limit is None else selected[:limit]
    stats = ReplayStats(trace=loader.name, speed=speed, skipped_lines=len(loader.errors),
                        first_errors=loader.errors[:FIRST_ERRORS],
                        filtered={k: v for k, v in loader.stats.as_dict().items() if v and k not in
                                  ("lines", "parsed", "selected", "nodes")})  # fmt: skip
    if len(jobs) < len(selected):
        stats.filtered["over_limit"] = stats.filtered.get("over_limit", 0) + len(selected) - len(jobs)
    due = due_times([j.offset_s for j in jobs], speed, max_gap_s)
    stats.trace_span_s = jobs[-1].offset_s - jobs[0].offset_s if jobs else 0.0
    stats.planned_s = due[-1] if due else 0.0

    if create_topics:
        await ensure_topics(settings)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("trace t={task.fields[offset]:,.0f}s"), TimeElapsedColumn(),
                  disable=not progress, transient=False) as bar:  # fmt: skip
        async with producer_factory(settings) as producer:
            ntask = bar.add_task(f"nodes {loader.name}", total=len(nodes), offset=0.0)
            for node in nodes:
                await producer.send("nodes.telemetry", published(node))
                stats.nodes += 1
                bar.advance(ntask)
            await producer.flush()
            if inventory_published is not None:
                await inventory_published(len(nodes))
            jtask = bar.add_task(f"jobs  {loader.name}", total=len(jobs), offset=0.0)
            source = replay_source(loader)
            t0 = clock.now()
            for job, at in zip(jobs, due, strict=True):
                if t0 + at > clock.now():
                    await producer.flush()  # what is due now goes out before we idle
                    wait = t0 + at - clock.now()  # what is left after the flush (the whole wait was slept: late)
                    if wait > 0:
                        stats.slept_s += wait
                        await clock.sleep(wait)
                await producer.send("jobs.submitted", published(job.event, source))
                stats.jobs += 1
                bar.update(jtask, advance=1, offset=job.offset_s)
            await producer.flush()
    stats.wall_s = clock.now() - started
    return stats
