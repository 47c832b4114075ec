"""``las``: Tiresias-style discretised two-dimensional least-attained-service (2D-LAS).

Tiresias (Gu et al., NSDI 2019) ranks jobs by *attained service* — GPUs × time the job
has already run, the "two dimensions" being spatial (GPUs) and temporal (time) — without
needing to know durations. Discretised: ``K = len(thresholds) + 1`` priority queues;
a job with attained service ``s`` sits in queue ``i`` = the number of thresholds ``<= s``
(queue 0 holds ``s < thresholds[0]`` and is served first). Inside a queue: FIFO (submit
time, then job id), as in the paper.

Attained service comes from ``context.attained_service`` (job id → service received in
earlier attempts, absent = 0) in :func:`~scheduling.order_context.service_rate` units:
GPU-seconds for GPU jobs (a 0.5-GPU share counts half), core-seconds for CPU-only jobs —
so the thresholds apply to both, a one-core CPU job being charged like one GPU.

Starvation guard (Tiresias' ``PROMOTEKNOB``): a job that has run before (executed time
``e > 0``, where ``e`` = attained service / service rate) and has now been waiting for
at least ``promote_knob × e`` (waiting since ``context.queued_since[job]``, else its
submit time) is promoted to queue 0. ``promote_knob=None`` disables the guard.

Deviation from the paper: Tiresias resets a promoted job's queue-executed time to 0, so it
keeps the top queue until it has run a further threshold; this ordering is stateless —
a promoted job that runs and is preempted again is ranked by its total attained service
again. Note also that without preemption every pending job has attained service 0 and
LAS degenerates to FIFO: it only differs where the caller re-queues preempted jobs.

A gang is ranked as one job: its attained service is the sum over members, its executed
time the longest member's, its wait since the latest member was re-queued.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from scheduling.job import JobRequest
from scheduling.order_context import EMPTY_CONTEXT, OrderContext, service_rate
from scheduling.orderings.base import Unit, sort_units
from scheduling.orderings.registry import register_ordering

DEFAULT_THRESHOLDS: tuple[float, ...] = (3600.0,)  # one GPU-hour: two queues
DEFAULT_PROMOTE_KNOB = 8.0


@register_ordering("las")
class DiscretisedLas:
    name = "las"

    def __init__(self, thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
                 promote_knob: float | None = DEFAULT_PROMOTE_KNOB) -> None:  # fmt: skip
        ts = tuple(float(t) for t in thresholds)
        if any(t <= 0 for t in ts) or any(b <= a for a, b in zip(ts, ts[1:], strict=False)):
            raise ValueError(f"las: thresholds must be positive and strictly increasing, got {list(ts)}")
        if promote_knob is not None and promote_knob < 0:
            raise ValueError("las: promote_knob must be >= 0 (or None to disable)")
        self.thresholds = ts
        self.promote_knob = promote_knob

    def queue_of(self, unit: Unit, now: float, context: OrderContext) -> int:
        """The queue index of ``unit`` (0 = served first), starvation promotion included."""
        attained = {j.job_id: float(context.attained_service.get(j.job_id, 0.0)) for j in unit}
        queue = bisect.bisect_right(self.thresholds, sum(attained.values()))
        if queue == 0 or self.promote_knob is None:
            return queue
        executed = max((attained[j.job_id] / service_rate(j) for j in unit if service_rate(j) > 0), default=0.0)
        waited = now - max(float(context.queued_since.get(j.job_id, j.submit_time)) for j in unit)
        if executed > 0 and waited >= self.promote_knob * executed:
            return 0
        return queue

    def queues_of(self, attained: np.ndarray, rate: np.ndarray, waited: np.ndarray) -> np.ndarray:
        """int ``[M]``: :meth:`queue_of` of ``M`` single jobs at once (the simulator ranks every running
        job this way at each step), from each one's ``attained`` service, service ``rate``
        (:func:`~scheduling.order_context.service_rate`) and the time ``waited`` since it was last queued
        (``now`` − ``queued_since``, else − submit time). Equal to :meth:`queue_of` job by job (a test)."""
        queue = np.searchsorted(np.asarray(self.thresholds, dtype=np.float64), attained, side="right")
        if self.promote_knob is None:
            return queue
        executed = np.divide(attained, rate, out=np.zeros_like(attained), where=rate > 0)
        return np.where((queue > 0) & (executed > 0) & (waited >= self.promote_knob * executed), 0, queue)

    def next_change(self, attained: np.ndarray, rate: np.ndarray, waited: np.ndarray, running: np.ndarray) -> float:
        """Seconds from now until :meth:`queues_of` of these jobs first changes with time alone (``inf``:
        never). A running job's (``running``, bool) service crosses thresholds, and every job's wait
        moves it into or (a running one: its executed time grows ``promote_knob`` times as fast as its
        wait) out of its starvation promotion. Each of those moments is a candidate; the answer is the
        first one at which a job's queue really changes (a promoted job crossing a threshold stays in
        queue 0). What a simulator that steps only on arrivals and departures must step for, as a
        worker stepping on its clock would see it."""
        if not len(attained):
            return np.inf
        attained, rate = np.asarray(attained, np.float64), np.asarray(rate, np.float64)
        waited, running = np.asarray(waited, np.float64), np.asarray(running, bool)
        thresholds = np.asarray(self.thresholds, np.float64)
        speed = np.where(running, rate, 0.0)  # attained service grows only while running
        with np.errstate(divide="ignore", invalid="ignore"):
            crossing = np.where(speed[:, None] > 0, (thresholds[None, :] - attained[:, None]) / speed[:, None], np.inf)
            candidates = [np.where(crossing > 0, crossing, np.inf)]  # [M, T]
            if self.promote_knob is not None:
                executed = np.divide(attained, rate, out=np.zeros_like(attained), where=rate > 0)
                k = self.promote_knob  # promoted while waited + dt >= k (executed + dt·running)
                closing = 1.0 - k * running
                flip = np.where(closing != 0, (k * executed - waited) / closing, np.inf)
                candidates.append(np.where(flip > 0, flip, np.inf)[:, None])
        times = np.concatenate(candidates, axis=1)  # [M, C]
        after = times * (1 + 1e-9) + 1e-9  # just past each candidate
        later = np.where(np.isfinite(after), after, 0.0)
        queues = self.queues_of((attained[:, None] + speed[:, None] * later).ravel(), np.repeat(rate, times.shape[1]),
                                (waited[:, None] + later).ravel()).reshape(times.shape)  # fmt: skip
        now = self.queues_of(attained, rate, waited)
        changed = np.isfinite(times) & (queues != now[:, None])
        return float(times[changed].min()) if changed.any() else np.inf

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ctx = context or EMPTY_CONTEXT
        return sort_units(jobs, lambda unit: self.queue_of(unit, now, ctx))
