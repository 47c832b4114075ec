"""``sjf-learned``: ``sjf-predicted`` with the learned duration predictor as its estimator.

Registered in the ordering registry when this module is imported (from :mod:`inference`;
``scheduling`` never imports torch or ``inference``), so ``sjf-learned+best-fit`` composes
like any ordering.

**The model**: ``model_dir`` (default ``$SEMSCHED_DURATION_MODEL_DIR``, else
``models/duration/latest``) holds ``config.json`` + ``duration.pt``
(:mod:`inference.duration.io`). If it is missing or fails to load, the ordering falls back to
plain ``sjf-predicted`` behaviour — the host's estimator from the :class:`OrderContext` (the
worker's and the simulator's :class:`~scheduling.duration_estimate.HistoryDurationPredictor`)
— and says so: ``fell_back`` is True and ``fallback_reason`` holds the error.

**Online learning**: the loaded predictor is ``self.predictor``; a host that wants it to learn
from finishing jobs passes it as the estimator it calls ``observe`` on (the simulator's
``estimator=``); otherwise its retrieval index stays as saved.

Each :meth:`order` predicts the pending jobs it has no fresh answer for in one batch (one
index query and one MLP call), then ranks exactly as ``sjf-predicted`` does: a declared
``runtime_estimate_s`` first, gangs by their longest member, ties FIFO. An answer stays fresh
until the retrieval index has grown by ``refresh`` finished jobs since it was computed (0 =
recompute every pending job at every step), and at most ``refresh_budget`` stale answers
(the stalest first) are recomputed per step — new jobs are always predicted. A retrieval query
costs a distance to every indexed job, and re-asking it for a long queue at every step
dominated the step time (openb held-out replay: step p99 ≈ 0.9 s at ``refresh=0``; Google 2011
with thousands pending: minutes per replay).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.orderings.base import sort_units
from scheduling.orderings.registry import ORDERINGS, register_ordering
from scheduling.orderings.sjf_predicted import DEFAULT_DURATION_S, predicted_duration

MODEL_DIR_ENV = "SEMSCHED_DURATION_MODEL_DIR"
DEFAULT_MODEL_DIR = Path("models/duration/latest")
NAME = "sjf-learned"
DEFAULT_REFRESH = 16  # finished jobs observed before a pending job's answer is recomputed
DEFAULT_REFRESH_BUDGET = 256  # stale answers recomputed per step at most
STALE = -(2**62)  # the index generation of an answer another model version gave: stale whatever the refresh


def job_key(job: JobRequest) -> tuple[str, str]:
    """What a job's cached answer is kept under: a job id is unique only within its cluster (found by
    review: one worker orders several clusters, and another cluster's job of the same id took its answer)."""
    return job.cluster, job.job_id


def _on_grid(seconds: float) -> float:
    """``seconds`` on a grid of 1e-4 in log space (0.01 %): two identical jobs predicted in batches of other
    sizes differ in the last float32 bits (the matrix product's rounding: found by review, 355.38677 against
    355.38674 s), and ranked on the raw floats the later one could go first; on the grid they tie, and ties
    keep arrival order."""
    if not seconds > 0 or math.isinf(seconds):  # (NaN: no answer; kept as it is)
        return seconds
    return math.exp(round(math.log(seconds), 4))


def default_model_dir() -> Path:
    return Path(os.environ.get(MODEL_DIR_ENV) or DEFAULT_MODEL_DIR)


class _Batch:
    """A ``DurationPredictor`` answering from one batch prediction (:func:`job_key` → seconds)."""

    def __init__(self, answers: dict[tuple[str, str], float]) -> None:
        self.answers = answers

    def predict(self, job: JobRequest) -> float | None:
        return self.answers.get(job_key(job))


class SjfLearned:
    name = NAME

    def __init__(self, model_dir: str | Path | None = None, *, default_s: float = DEFAULT_DURATION_S,
                 predictor: Any = None, refresh: int = DEFAULT_REFRESH,
                 refresh_budget: int = DEFAULT_REFRESH_BUDGET) -> None:  # fmt: skip
        """``predictor``: a :class:`~inference.duration.predictor.LearnedDurationPredictor` to
        use instead of loading a directory (tests, benchmarks); ``refresh``, ``refresh_budget``:
        see the module docstring."""
        if not default_s >= 0:
            raise ValueError(f"{NAME}: default_s must be >= 0")
        if refresh < 0 or refresh_budget < 1:
            raise ValueError(f"{NAME}: refresh must be >= 0 and refresh_budget >= 1")
        self.refresh_budget = int(refresh_budget)
        self.default_s = float(default_s)
        self.refresh = int(refresh)
        self._forget_answers()
        self.model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        self.model_path: Path | None = None  # the version directory ``model_dir`` resolved to when loaded
        self.predictor = predictor
        self.fell_back = False
        self.fallback_reason: str | None = None
        if self.predictor is None:
            try:
                from inference.duration.io import load_predictor

                path = self.model_dir.resolve(strict=True)
                self.predictor, self.model_path = load_predictor(path), path
            except Exception as e:  # missing, corrupt or mismatched: use the host's estimator
                self.fell_back = True
                self.fallback_reason = f"{type(e).__name__}: {e}"

    def use_predictor(self, predictor: Any, path: Path) -> None:
        """Order by ``predictor`` (the version in ``path``) from now on: a new duration model picked up
        without a restart (:mod:`streams.duration_reload`). The old version's answers are kept as stale
        ones, recomputed ``refresh_budget`` a step, stalest first, as after the index grows (found by
        review: forgotten, the next step predicted the whole queue at once, ~4 s for 5,000 jobs, on
        the worker's event loop)."""
        self.predictor, self.model_path = predictor, path
        self.fell_back, self.fallback_reason = False, None
        self._mark_stale()

    def _forget_answers(self) -> None:
        self._answers: dict[tuple[str, str], tuple[float, int]] = {}  # job_key -> (seconds or NaN, index generation)

    def _mark_stale(self) -> None:
        self._answers = {k: (v, STALE) for k, (v, _) in self._answers.items()}

    @property
    def model_version(self) -> str | None:
        return None if self.predictor is None else self.predictor.version

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        if self.predictor is None:
            estimator = context.estimator if context is not None else None
        else:
            estimator = _Batch(self._predict([j for j in jobs if j.runtime_estimate_s is None]))
        memo = {job_key(j): predicted_duration(j, estimator, self.default_s) for j in jobs}
        return sort_units(jobs, lambda unit: max(memo[job_key(j)] for j in unit))

    def _predict(self, ask: list[JobRequest]) -> dict[tuple[str, str], float]:
        """Seconds per :func:`job_key` (no entry: no answer), recomputing only stale or new answers."""
        index = getattr(self.predictor, "index", None)
        gen = index.generation if index is not None else 0
        cache = self._answers
        keys = [job_key(j) for j in ask]
        new = [j for j, k in zip(ask, keys, strict=True) if k not in cache]
        old = [j for j, k in zip(ask, keys, strict=True) if k in cache and gen - cache[k][1] > self.refresh]
        if len(old) > self.refresh_budget:  # the stalest first; the rest wait for a later step
            old = sorted(old, key=lambda j: cache[job_key(j)][1])[: self.refresh_budget]
        stale = new + old
        if stale:
            for j, v in zip(stale, self.predictor.predict_many(stale), strict=True):
                cache[job_key(j)] = (_on_grid(float(v)), gen)
        if len(cache) > 4 * len(ask) + 4096:  # forget jobs that left the queue
            keep = set(keys)
            self._answers = cache = {k: v for k, v in cache.items() if k in keep}
        return {k: v for k in keys if not np.isnan(v := cache[k][0])}

    def __repr__(self) -> str:
        what = f"fallback sjf-predicted: {self.fallback_reason}" if self.fell_back else self.model_version
        return f"<ordering {NAME} ({what})>"


if NAME not in ORDERINGS.names():  # re-importing (tests reload modules) must not raise
    register_ordering(NAME)(SjfLearned)
