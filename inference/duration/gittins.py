"""``gittins-learned``: the ``gittins`` ordering on the learned duration predictor's *uncertainty*.

``sjf-learned`` ranks by one number per job; this ordering gives
:mod:`scheduling.orderings.gittins` a predictive distribution per job instead, taken from the
same predictor (:class:`~inference.duration.predictor.LearnedDurationPredictor`) in one pass:

- the job's ``k`` nearest finished jobs in the retrieval index, with the index's own weights
  ``exp(−(d² − d²_min) / tau)`` — the very neighbours whose weighted median the predictor's
  retrieval answers with (:func:`neighbours_and_blend` recomputes the blend from them, so one
  distance computation serves both; a test checks it equals ``predict_many``);
- ``samples="neighbours"``: the neighbours' run times as they are;
- ``samples="centred"`` (default): the neighbours' spread moved onto the predictor's answer —
  ``exp(blend + log d_i − weighted median of log d)`` — the point estimate the validation chose,
  with the shape of the evidence around it (a job whose nearest jobs ran from 1 minute to a day
  gets a wide distribution, one whose neighbours all ran 5 minutes a narrow one);
- an empty index (nothing finished yet): the blend (the regression) as a single sample.

Loading, fallback (no model → plain ``gittins`` on the host's estimator), per-job caching and
the refresh budget are ``sjf-learned``'s (:class:`~inference.duration.ordering.SjfLearned`):
samples are recomputed only when the index has grown by ``refresh`` finished jobs, at most
``refresh_budget`` stale ones per step. The index itself is recomputed every step (it depends
on the attained service) and is vectorised over the whole queue.

Registered in the ordering registry on import (``inference.duration`` imports it), so
``gittins-learned+best-fit`` composes like any ordering.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inference.duration.ordering import DEFAULT_REFRESH, DEFAULT_REFRESH_BUDGET, STALE, SjfLearned, job_key
from inference.duration.predictor import blend_answers
from inference.duration.retrieval import weighted_median
from scheduling.job import JobRequest
from scheduling.order_context import EMPTY_CONTEXT, OrderContext
from scheduling.orderings.gittins import RULES, Gittins, compute_index, executed_seconds, rank_by_index
from scheduling.orderings.registry import ORDERINGS, register_ordering
from scheduling.orderings.sjf_predicted import DEFAULT_DURATION_S

NAME = "gittins-learned"
SAMPLES = ("centred", "neighbours")


def neighbours_and_blend(predictor: Any, jobs: Sequence[JobRequest], chunk: int = 256,
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """``(neighbour log seconds [n, k], their weights [n, k], blend log seconds [n])``.

    The neighbours are :meth:`NeighbourIndex.query`'s (same distance, same ``k``, same weights);
    the blend is :meth:`LearnedDurationPredictor.components`' ``blend`` computed from them.
    ``k`` columns are NaN / weight 0 where the index is empty."""
    cfg, index = predictor.config, predictor.index
    text, shape, reg = predictor.features(jobs)
    reg = reg + cfg.regression_shift
    n, k = len(jobs), min(index.k, len(index))
    logd = np.full((n, max(k, 1)), np.nan)
    w = np.zeros((n, max(k, 1)))
    mean_d2 = np.full(n, np.inf)
    if k > 0:
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            d2 = index.distances(text[lo:hi], shape[lo:hi])
            idx = np.argpartition(d2, k - 1, axis=1)[:, :k] if k < len(index) else np.tile(np.arange(k), (hi - lo, 1))
            nd = np.take_along_axis(d2, idx, axis=1)
            w[lo:hi] = np.exp(-(nd - nd.min(axis=1, keepdims=True)) / index.tau)
            logd[lo:hi] = index.log_durations[idx]
            mean_d2[lo:hi] = nd.mean(axis=1)
    retr = weighted_median(logd.astype(np.float32), w.astype(np.float32)).astype(np.float64) if k > 0 \
        else np.full(n, np.nan)  # fmt: skip
    hist = predictor.history.specific(jobs, cfg.history_min_count)
    _, _, blend = blend_answers(cfg, predictor.regressor is not None, reg, retr, mean_d2, hist)
    return logd, w, blend


def predictive_samples(predictor: Any, jobs: Sequence[JobRequest], samples: str = "centred",
                       ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(seconds [n, k], weights [n, k])`` per job (see the module docstring); a row of NaN
    where the predictor has nothing to go on."""
    if samples not in SAMPLES:
        raise ValueError(f"samples must be one of {', '.join(SAMPLES)}, not {samples!r}")
    logd, w, blend = neighbours_and_blend(predictor, jobs)
    if samples == "centred":
        med = weighted_median(np.nan_to_num(logd).astype(np.float32), w.astype(np.float32)).astype(np.float64)
        logd = blend[:, None] + (logd - med[:, None])
    none = np.isnan(logd).all(axis=1)  # empty index: the blend alone
    logd[none, 0], w[none, 0] = blend[none], 1.0
    return np.exp(logd), w


class GittinsLearned(SjfLearned):
    name = NAME

    def __init__(self, model_dir: str | Path | None = None, *, default_s: float = DEFAULT_DURATION_S,
                 predictor: Any = None, refresh: int = DEFAULT_REFRESH, refresh_budget: int = DEFAULT_REFRESH_BUDGET,
                 rule: str = "gittins", samples: str = "centred", quantile: float = 0.25,
                 restart: bool = True) -> None:  # fmt: skip
        """``rule``, ``quantile``, ``restart``: :mod:`scheduling.orderings.gittins`; ``samples``:
        the module docstring; the rest: :class:`SjfLearned`."""
        super().__init__(model_dir, default_s=default_s, predictor=predictor, refresh=refresh,
                         refresh_budget=refresh_budget)  # fmt: skip
        if rule not in RULES or samples not in SAMPLES:
            raise ValueError(f"{NAME}: rule must be one of {RULES}, samples one of {SAMPLES}")
        self.rule, self.samples, self.quantile, self.restart = rule, samples, float(quantile), bool(restart)
        self._fallback = Gittins(default_s=default_s, rule=rule, quantile=quantile, restart=restart)

    def _mark_stale(self) -> None:
        super()._mark_stale()
        self._gen[:] = STALE

    def _forget_answers(self) -> None:
        super()._forget_answers()
        self._slot: dict[tuple[str, str], int] = {}  # job_key -> row of the arrays below
        self._s, self._w = np.zeros((0, 1)), np.zeros((0, 1))  # samples (seconds, NaN = none), weights
        self._gen = np.zeros(0, np.int64)  # index generation each row was computed at

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        if self.predictor is None:
            return self._fallback.order(jobs, now, context)
        if not jobs:
            return []
        ctx = context or EMPTY_CONTEXT
        s, w = self._samples(jobs)
        declared = np.array([np.nan if j.runtime_estimate_s is None else float(j.runtime_estimate_s) for j in jobs])
        has = ~np.isnan(declared)
        s[has], w[has] = np.nan, 0.0
        s[has, 0], w[has, 0] = declared[has], 1.0  # a declared run time is taken as known
        index = compute_index(self.rule, s, w, executed_seconds(jobs, ctx), restart=self.restart,
                              quantile=self.quantile)  # fmt: skip
        return rank_by_index(jobs, index, 1.0 / self.default_s)

    def _samples(self, jobs: Sequence[JobRequest]) -> tuple[np.ndarray, np.ndarray]:
        """``[n, k]`` samples and weights, recomputing only new or stale rows (as ``sjf-learned``).
        Rows live in one array per quantity (a slot per job), so a step gathers them in one take."""
        gen = self.predictor.index.generation
        slot = self._slot
        keys = [job_key(j) for j in jobs]
        new = [j for j, k in zip(jobs, keys, strict=True) if k not in slot]
        old = [j for j, k in zip(jobs, keys, strict=True) if k in slot and gen - self._gen[slot[k]] > self.refresh]
        if len(old) > self.refresh_budget:
            old = sorted(old, key=lambda j: self._gen[slot[job_key(j)]])[: self.refresh_budget]
        if len(slot) + len(new) > 4 * len(jobs) + 4096:  # forget jobs that left the queue
            self._compact(set(keys))
            slot = self._slot
        if new or old:
            ask = new + old
            s, w = predictive_samples(self.predictor, ask, self.samples)
            for j in new:
                slot[job_key(j)] = len(slot)
            self._grow(len(slot), s.shape[1])
            at = np.array([slot[job_key(j)] for j in ask])
            self._s[at], self._w[at] = np.nan, 0.0
            self._s[at, : s.shape[1]], self._w[at, : s.shape[1]], self._gen[at] = s, w, gen
        at = np.array([slot[k] for k in keys])
        return self._s[at].copy(), self._w[at].copy()

    def _grow(self, rows: int, width: int) -> None:
        if rows <= len(self._s) and width <= self._s.shape[1]:
            return
        cap, wide = max(rows, 2 * len(self._s), 64), max(width, self._s.shape[1])
        s, w, g = np.full((cap, wide), np.nan), np.zeros((cap, wide)), np.zeros(cap, np.int64)
        n = len(self._s)
        s[:n, : self._s.shape[1]], w[:n, : self._w.shape[1]], g[:n] = self._s, self._w, self._gen
        self._s, self._w, self._gen = s, w, g

    def _compact(self, keep: set[tuple[str, str]]) -> None:
        kept = [(k, i) for k, i in self._slot.items() if k in keep]
        at = np.array([i for _, i in kept], dtype=np.int64)
        self._s, self._w, self._gen = self._s[at], self._w[at], self._gen[at]
        self._slot = {k: n for n, (k, _) in enumerate(kept)}

    def __repr__(self) -> str:
        what = f"fallback gittins: {self.fallback_reason}" if self.fell_back else self.model_version
        return f"<ordering {NAME} {self.rule}/{self.samples} ({what})>"


if NAME not in ORDERINGS.names():  # re-importing (tests reload modules) must not raise
    register_ordering(NAME)(GittinsLearned)
