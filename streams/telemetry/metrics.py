"""The control plane's metrics (OpenTelemetry metrics API).

=================================  =========  ==========================================================
``semsched.decision.latency``      histogram  ms from submission (or re-queue) to the decision, per
                                              decided job; attributes ``policy``, ``outcome``
                                              (placed | rejected) — the decision record's ``latency_ms``
``semsched.queue.depth``           gauge      pending jobs per ``cluster`` (the worker's last step)
``semsched.queue.oldest_age``      gauge      s since the oldest pending job of a ``cluster`` was
                                              submitted (or re-queued)
``semsched.deadletters``           counter    dead letters by ``reason_class`` (invalid, oversized,
                                              not_utf8, empty, wrong_partition, duplicate,
                                              internal_error, other), ``topic`` and ``source``
``semsched.archive.lag``           gauge      records not yet in the archive, by ``stage``:
                                              ``unconsumed`` (on the topics, not read yet) and
                                              ``buffered`` (read, waiting for the next batch write)
``semsched.archive.lag_seconds``   gauge      age of the oldest read-but-unwritten record
=================================  =========  ==========================================================

The gauges are observed by the SDK's reader thread, so they read small snapshots that the
event loop replaces (never the Faust tables themselves): :data:`QUEUE` is updated once per
scheduling step, archivers register themselves in :data:`ARCHIVES`.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from opentelemetry.metrics import CallbackOptions, Observation

from scheduling.deadletter_classes import reason_class
from streams.telemetry.setup import on_meter

LATENCY_BUCKETS_MS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)

EMPTY_KEPT_S = 300.0  # how long a cluster whose queue emptied is reported at 0 before its series goes


class QueueSnapshot:
    """Pending jobs per cluster as of the last scheduling step (replaced, never mutated)."""

    def __init__(self) -> None:
        self.depth: dict[str, int] = {}
        self.oldest_ts: dict[str, float] = {}
        self._seen: dict[str, float] = {}  # cluster -> when its queue last held a job

    def update(self, depth: dict[str, int], oldest_ts: dict[str, float], now: float | None = None) -> None:
        # a cluster whose queue emptied reports 0 rather than disappearing, for EMPTY_KEPT_S; then its series
        # goes (found by review: a producer's every cluster name stayed a series for good)
        now = time.time() if now is None else now
        kept = {c: t for c, t in self._seen.items() if now - t <= EMPTY_KEPT_S}
        self._seen = kept | {c: now for c, n in depth.items() if n}
        self.depth = {**dict.fromkeys(self._seen, 0), **depth}
        self.oldest_ts = oldest_ts

    def clear(self) -> None:
        self.depth, self.oldest_ts, self._seen = {}, {}, {}


class _Lagging(Protocol):
    def lag_snapshot(self) -> tuple[int, int, float]: ...  # (unconsumed, buffered, oldest age s)


QUEUE = QueueSnapshot()
ARCHIVES: weakref.WeakSet[Any] = weakref.WeakSet()


def _queue_depth(_: CallbackOptions) -> Iterable[Observation]:
    return [Observation(n, {"cluster": c}) for c, n in QUEUE.depth.items()]


def _queue_age(_: CallbackOptions) -> Iterable[Observation]:
    now, oldest = time.time(), QUEUE.oldest_ts
    return [Observation(max(0.0, now - oldest[c]) if c in oldest else 0.0, {"cluster": c}) for c in QUEUE.depth]


def _archive_snapshots() -> list[tuple[int, int, float]]:
    out = []
    for a in list(ARCHIVES):
        try:
            out.append(a.lag_snapshot())
        except Exception:  # noqa: BLE001 - an archiver mid-shutdown: skip it this time
            continue
    return out


def _archive_lag(_: CallbackOptions) -> Iterable[Observation]:
    snaps = _archive_snapshots()
    if not snaps:
        return []
    return [Observation(sum(s[0] for s in snaps), {"stage": "unconsumed"}),
            Observation(sum(s[1] for s in snaps), {"stage": "buffered"})]  # fmt: skip


def _archive_age(_: CallbackOptions) -> Iterable[Observation]:
    snaps = _archive_snapshots()
    return [Observation(max(s[2] for s in snaps))] if snaps else []


class Instruments:
    """The synchronous instruments, rebuilt whenever telemetry is (re)configured."""

    decision_latency: Any = None
    deadletters: Any = None

    def bind(self, meter: Any) -> None:
        self.decision_latency = meter.create_histogram(
            "semsched.decision.latency", unit="ms", description="submission (or re-queue) to decision",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_MS)  # fmt: skip
        self.deadletters = meter.create_counter("semsched.deadletters", unit="{message}",
                                                description="messages sent to the dead-letter topic")  # fmt: skip
        meter.create_observable_gauge("semsched.queue.depth", [_queue_depth], unit="{job}",
                                      description="pending jobs (last scheduling step)")  # fmt: skip
        meter.create_observable_gauge("semsched.queue.oldest_age", [_queue_age], unit="s",
                                      description="age of the oldest pending job")  # fmt: skip
        meter.create_observable_gauge("semsched.archive.lag", [_archive_lag], unit="{record}",
                                      description="records not yet written to the archive")  # fmt: skip
        meter.create_observable_gauge("semsched.archive.lag_seconds", [_archive_age], unit="s",
                                      description="age of the oldest read but unwritten record")  # fmt: skip


INSTRUMENTS = Instruments()
on_meter(INSTRUMENTS.bind)


def record_decision(latency_ms: float, *, policy: str, outcome: str) -> None:
    INSTRUMENTS.decision_latency.record(latency_ms, {"policy": policy, "outcome": outcome})


def count_deadletter(reason: str, *, topic: str, source: str) -> None:
    INSTRUMENTS.deadletters.add(1, {"reason_class": reason_class(reason), "topic": topic, "source": source})


def observe_queue(pending: dict[str, list[Any]]) -> None:
    """Called by the scheduling loop once per step with its pending jobs per cluster
    (``(PendingJob, JobRequest)`` pairs): one pass over the queue, no per-node work."""
    depth = {c: len(jobs) for c, jobs in pending.items()}
    oldest = {c: min(p.submit_ts if p.attempt == 0 else p.queued_ts for p, _ in jobs)
              for c, jobs in pending.items() if jobs}  # fmt: skip
    QUEUE.update(depth, oldest)
