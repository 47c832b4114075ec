"""``KeyHistory``: what the same user / app / program / exact request ran recently.

The history baseline (:class:`scheduling.duration_estimate.HistoryDurationPredictor`) answers
from the running median of the most specific key with enough finished jobs. Its strength is
exactness — tasks of the same Google job, instances of the same DLRM app, pods with the very
same request — which a distance over hashed text and scaled shapes only approximates. This
module keeps the same kind of evidence for the learned predictor, per key family
(:data:`FAMILIES`):

- ``app`` — ``job.app`` (a Google job id, a DLRM app name);
- ``user`` — ``job.user`` (Google's user);
- ``name`` — the :func:`~inference.duration.features.duration_text` without the parts that
  name the app (Google's program names without the job id: the job's tasks are submitted
  together, so the job id has no finished sibling when a task is submitted, while the same
  program ran before; a DLRM instance's role, disk and RDMA request);
- ``tenant-shape`` — tenant, GPU count and share, cores rounded up to a power of two (the
  history baseline's second key);
- ``exact`` — the text and the exact resource request (cpu, memory, GPUs, GPU models).

Per job and family, :meth:`KeyHistory.features` gives the median log run time of the key's
last ``window`` finished jobs, how many it has seen (``log1p``) and their spread (the
interquartile range of the window, log seconds). :meth:`KeyHistory.specific` is what the
predictor blends in: the median of the most specific of the exact families
(:data:`SPECIFIC`: ``exact``, ``app``, ``name``) that has seen ``min_count`` finished jobs.
``user`` and ``tenant-shape`` are kept as features but not blended: on every trace's
validation part they were far worse than the regression (Google: mean |log error| ≈ 1.0
against 0.25). Only finished jobs are ever added (``observe``), so everything is known when a
job is submitted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from inference.duration.features import duration_text
from scheduling.duration_estimate import shape_key
from scheduling.job import JobRequest

FAMILIES: tuple[str, ...] = ("app", "user", "name", "tenant-shape", "exact")
STATS: tuple[str, ...] = ("median", "log_count", "spread")
SPECIFIC: tuple[str, ...] = ("exact", "app", "name")  # most specific first


def job_keys(job: JobRequest) -> tuple[str | None, ...]:
    """One key per family (``None``: the job has nothing for it), as strings (saved as JSON)."""
    text = duration_text(job)
    name = " | ".join(p for p in text.split(" | ") if not (job.app and job.app in p))
    request = f"{job.cpu_milli}/{job.memory_mib}/{job.num_gpu}/{job.per_gpu_milli}/{','.join(sorted(job.gpu_models))}"
    return (
        f"a:{job.app}" if job.app else None,
        f"u:{job.user}" if job.user else None,
        f"n:{name}" if name else None,
        "s:{}:{}:{}:{}".format(job.tenant, *shape_key(job)),
        f"e:{text}|{request}",
    )


def specific(features: np.ndarray, min_count: int) -> np.ndarray:
    """float64 ``[n]`` from :meth:`KeyHistory.features`: the median log run time of the first
    family of :data:`SPECIFIC` whose key has seen at least ``min_count`` finished jobs; NaN
    when none has."""
    out = np.full(len(features), np.nan)
    need = np.log1p(max(1, min_count)) - 1e-12
    for fam in SPECIFIC:
        i = FAMILIES.index(fam)
        take = np.isnan(out) & (features[:, i, 1] >= need)
        out[take] = features[take, i, 0]
    return out


class KeyHistory:
    """Per key, the log run times of its last ``window`` finished jobs (see the module docstring)."""

    def __init__(self, window: int = 32) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = int(window)
        self._values: dict[str, deque[float]] = {}
        self._counts: dict[str, int] = {}
        self._stats: dict[str, tuple[float, float, float]] = {}  # cached (median, log_count, spread)
        self._keys: dict[JobRequest, tuple[str | None, ...]] = {}

    def __len__(self) -> int:
        return len(self._values)

    def keys(self, job: JobRequest) -> tuple[str | None, ...]:
        k = self._keys.get(job)
        if k is None:
            if len(self._keys) > 200_000:
                self._keys.clear()
            k = self._keys[job] = job_keys(job)
        return k

    def observe_many(self, jobs: Sequence[JobRequest], log_durations: Iterable[float]) -> None:
        """Add finished jobs (log seconds), oldest first."""
        for job, y in zip(jobs, log_durations, strict=True):
            for key in self.keys(job):
                if key is None:
                    continue
                q = self._values.get(key)
                if q is None:
                    q = self._values[key] = deque(maxlen=self.window)
                q.append(float(y))
                self._counts[key] = self._counts.get(key, 0) + 1
                self._stats.pop(key, None)

    def _stat(self, key: str | None) -> tuple[float, float, float]:
        if key is None or key not in self._values:
            return (np.nan, 0.0, np.nan)
        s = self._stats.get(key)
        if s is None:
            v = np.fromiter(self._values[key], np.float64)
            q25, q50, q75 = np.quantile(v, (0.25, 0.5, 0.75))
            s = self._stats[key] = (float(q50), float(np.log1p(self._counts[key])), float(q75 - q25))
        return s

    def features(self, jobs: Sequence[JobRequest]) -> np.ndarray:
        """float64 ``[n, len(FAMILIES), len(STATS)]``: per family the window's median log run
        time (NaN: the key has none yet), ``log1p`` of its count, and its spread (NaN: none)."""
        out = np.empty((len(jobs), len(FAMILIES), len(STATS)))
        for i, job in enumerate(jobs):
            for f, key in enumerate(self.keys(job)):
                out[i, f] = self._stat(key)
        return out

    def specific(self, jobs: Sequence[JobRequest], min_count: int) -> np.ndarray:
        """:func:`specific` of these jobs' :meth:`features`."""
        return specific(self.features(jobs), min_count)

    # -- persistence (inference.duration.io) ----------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"window": self.window, "values": {k: list(v) for k, v in self._values.items()},
                "counts": dict(self._counts)}  # fmt: skip

    def load_state(self, state: dict[str, Any]) -> None:
        self.window = int(state["window"])
        self._values = {k: deque((float(x) for x in v), maxlen=self.window) for k, v in state["values"].items()}
        self._counts = {k: int(v) for k, v in state["counts"].items()}
        self._stats.clear()
