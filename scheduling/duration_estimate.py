"""A baseline online duration predictor: the running median of similar finished jobs.

:class:`HistoryDurationPredictor` implements
:class:`~scheduling.order_context.LearningDurationPredictor`. The offline simulator (and
the worker) call :meth:`~HistoryDurationPredictor.observe` when a job finishes
successfully, with its run time, and pass the predictor as ``OrderContext.estimator``;
``sjf-predicted`` then ranks pending jobs by :meth:`~HistoryDurationPredictor.predict`.

Each finished job is recorded under three keys, most specific first:

1. ``app`` — the same application (``job.app``; the DLRM trace's ``app_name``);
2. ``tenant`` + resource shape — the same tenant asking for the same GPUs (count and
   per-GPU share) and a similar CPU size (cores rounded up to a power of two);
3. ``global`` — every finished job.

``predict`` answers from the first key with at least ``min_samples`` observations
(``global`` needs one), else ``cold_start_s`` (``None`` = "no idea", so the ordering
falls back to its own default). The answer is the **median** of the key's last ``window``
observations: job durations are heavy-tailed, and one week-long outlier should not
make every job of its app look long (the mean would); the window lets the estimate
follow drift. It never reads ``trace_duration_s``. ``JobRequest`` carries no user or
job name yet, so the tenant stands in for the user and the app for the name.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from scheduling.job import JobRequest
from scheduling.order_context import LearningDurationPredictor

Key = tuple[object, ...]
GLOBAL_KEY: Key = ("global",)


def shape_key(job: JobRequest) -> tuple[int, int, int]:
    """``(num_gpu, per_gpu_milli, cores rounded up to a power of two)``."""
    cores = max(1, math.ceil(job.cpu_milli / 1000))
    return (job.num_gpu, job.per_gpu_milli, 1 << (cores - 1).bit_length())


def keys_for(job: JobRequest) -> list[Key]:
    """The keys a job is recorded under and looked up by, most specific first."""
    keys: list[Key] = []
    if job.app:
        keys.append(("app", job.app))
    keys.append(("tenant-shape", job.tenant, *shape_key(job)))
    keys.append(GLOBAL_KEY)
    return keys


@dataclass
class _Window:
    values: deque[float]
    median: float | None = None  # cached; None = recompute

    def add(self, value: float) -> None:
        self.values.append(value)
        self.median = None

    def current(self) -> float:
        if self.median is None:
            self.median = float(np.median(np.fromiter(self.values, dtype=np.float64, count=len(self.values))))
        return self.median


@dataclass
class HistoryDurationPredictor:
    """Running median per key (app → tenant + shape → global), see the module docstring."""

    window: int = 256
    min_samples: int = 3
    cold_start_s: float | None = None
    _windows: dict[Key, _Window] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_samples < 1:
            raise ValueError("window and min_samples must be >= 1")
        if self.cold_start_s is not None and not self.cold_start_s >= 0:
            raise ValueError("cold_start_s must be >= 0 or None")

    def observe(self, job: JobRequest, duration_s: float) -> None:
        """Record that ``job`` ran ``duration_s`` seconds (call on a successful finish)."""
        d = float(duration_s)
        if not (d >= 0 and math.isfinite(d)):
            raise ValueError(f"job {job.job_id}: duration must be a finite number >= 0, got {duration_s!r}")
        for key in keys_for(job):
            w = self._windows.get(key)
            if w is None:
                w = self._windows[key] = _Window(deque(maxlen=self.window))
            w.add(d)

    def explain(self, job: JobRequest) -> tuple[float | None, str]:
        """``(prediction, where it came from)`` — e.g. ``(120.0, "app=recsys, median of 17")``."""
        for key in keys_for(job):
            w = self._windows.get(key)
            need = 1 if key == GLOBAL_KEY else self.min_samples
            if w is not None and len(w.values) >= need:
                label = "global" if key == GLOBAL_KEY else f"{key[0]}={','.join(map(str, key[1:]))}"
                return w.current(), f"{label}, median of {len(w.values)}"
        return self.cold_start_s, "cold start"

    def predict(self, job: JobRequest) -> float | None:
        """The predicted run time in seconds (``None`` only on a cold start without a default)."""
        return self.explain(job)[0]

    def samples(self, job: JobRequest) -> dict[str, int]:
        """How many observations each of ``job``'s keys holds (diagnostics)."""
        return {"/".join(map(str, k)): len(self._windows[k].values) if k in self._windows else 0
                for k in keys_for(job)}  # fmt: skip


def estimator_for(policy: object) -> LearningDurationPredictor:
    """The duration predictor a host (the worker, the simulator) should feed finished jobs and
    hand to the ordering: the ordering's own learning predictor when it has one (``sjf-learned``
    keeps its model's retrieval index current this way), else a fresh history predictor."""
    own = getattr(getattr(policy, "ordering", policy), "predictor", None)
    if own is not None and callable(getattr(own, "observe", None)) and callable(getattr(own, "predict", None)):
        return own  # type: ignore[no-any-return]
    return HistoryDurationPredictor()
