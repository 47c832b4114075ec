"""``NeighbourIndex``: the finished jobs most similar to a new one, and what they ran.

Every finished job is one row: its text vector (unit length), its shape row
(:func:`inference.duration.features.shape_features`) and its log run time. The distance of a
query to a row is

    d² = text_weight · ‖t_q − t_r‖² + shape_weight · ‖s_q − s_r‖² / SHAPE_DIM + recency · age

where ``age`` ∈ [0, 1] is the row's position from the newest (0) to the oldest (1) row: a
tiny default that only breaks ties (many jobs of one app look exactly alike) in favour of
the most recent runs, which follows drift. The answer for a query is the **weighted median**
of the log run times of its ``k`` nearest rows, weights ``exp(−(d² − d²_min) / tau)``: a
median, because run times are heavy-tailed and one week-long outlier must not drag the
estimate. Also returned: the mean d² of the neighbours (how close the evidence is), which the
blend uses to decide how much to trust retrieval.

All numpy, vectorised over rows (one matrix product per query batch); rows are kept in
growing arrays (amortised O(1) append), the oldest dropped beyond ``max_rows``, a tenth of them at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def weighted_median(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``values`` ``[B, k]`` the weighted median under ``weights`` ``[B, k]`` (>= 0):
    the smallest value whose cumulative weight reaches half of the row's total."""
    order = np.argsort(values, axis=1)
    v = np.take_along_axis(values, order, axis=1)
    w = np.take_along_axis(weights, order, axis=1)
    cum = np.cumsum(w, axis=1)
    half = 0.5 * cum[:, -1:]
    idx = np.argmax(cum >= half - 1e-12, axis=1)
    return v[np.arange(len(v)), idx]


@dataclass
class Neighbours:
    """Per query: the weighted-median log run time, the mean and minimum d² of the neighbours
    used, how many there were, and the nearest row's index (diagnostics)."""

    log_duration: np.ndarray
    mean_d2: np.ndarray
    min_d2: np.ndarray
    count: np.ndarray
    nearest: np.ndarray


class NeighbourIndex:
    def __init__(self, text_dim: int, shape_dim: int, *, k: int = 16, tau: float = 0.05,
                 text_weight: float = 1.0, shape_weight: float = 1.0, recency: float = 1e-3,
                 max_rows: int = 200_000) -> None:  # fmt: skip
        if k < 1 or tau <= 0 or max_rows < 1:
            raise ValueError("k >= 1, tau > 0 and max_rows >= 1 are required")
        self.text_dim, self.shape_dim = text_dim, shape_dim
        self.k, self.tau = k, tau
        self.text_weight, self.shape_weight, self.recency = text_weight, shape_weight, recency
        self.max_rows = max_rows
        cap = 1024
        self._text = np.zeros((cap, text_dim), np.float32)
        self._shape = np.zeros((cap, shape_dim), np.float32)
        self._logd = np.zeros(cap, np.float32)
        self._n = 0
        self.generation = 0  # bumped on every change: callers cache answers per generation

    def __len__(self) -> int:
        return self._n

    @property
    def text(self) -> np.ndarray:
        return self._text[: self._n]

    @property
    def shape(self) -> np.ndarray:
        return self._shape[: self._n]

    @property
    def log_durations(self) -> np.ndarray:
        return self._logd[: self._n]

    def add(self, text: np.ndarray, shape: np.ndarray, log_durations: np.ndarray) -> None:
        """Append rows (``[n, text_dim]``, ``[n, shape_dim]``, ``[n]``), newest last."""
        text = np.asarray(text, np.float32).reshape(-1, self.text_dim)
        shape = np.asarray(shape, np.float32).reshape(-1, self.shape_dim)
        logd = np.asarray(log_durations, np.float32).reshape(-1)
        n = len(logd)
        if not (len(text) == len(shape) == n):
            raise ValueError("text, shape and log_durations must have the same number of rows")
        if n == 0:
            return
        if self._n + n > self.max_rows:  # drop the oldest, a tenth of the index at a time (found by review: one
            # row at a time moved the whole index, ~67 MB at 200,000 rows, on each finished job once it was full)
            keep = max(0, min(self.max_rows - n, self.max_rows - max(1, self.max_rows // 10)))
            drop = self._n - keep
            for arr in (self._text, self._shape, self._logd):
                arr[:keep] = arr[drop : self._n]
            self._n = keep
            text, shape, logd = text[-self.max_rows :], shape[-self.max_rows :], logd[-self.max_rows :]
            n = len(logd)
        need = self._n + n
        if need > len(self._logd):
            cap = max(need, 2 * len(self._logd))
            self._text = np.resize(self._text, (cap, self.text_dim))
            self._shape = np.resize(self._shape, (cap, self.shape_dim))
            self._logd = np.resize(self._logd, cap)
        self._text[self._n : need] = text
        self._shape[self._n : need] = shape
        self._logd[self._n : need] = logd
        self._n = need
        self.generation += 1

    def distances(self, text: np.ndarray, shape: np.ndarray) -> np.ndarray:
        """float32 ``[B, rows]``: d² of every query to every row (see the module docstring)."""
        t, s = self.text, self.shape
        d2 = self.text_weight * (
            (text * text).sum(1)[:, None] + (t * t).sum(1)[None, :] - 2.0 * (text @ t.T)
        )
        d2 += (self.shape_weight / self.shape_dim) * (
            (shape * shape).sum(1)[:, None] + (s * s).sum(1)[None, :] - 2.0 * (shape @ s.T)
        )
        np.maximum(d2, 0.0, out=d2)
        if self.recency and self._n > 1:
            d2 += self.recency * np.linspace(1.0, 0.0, self._n, dtype=np.float32)[None, :]
        return d2

    def query(self, text: np.ndarray, shape: np.ndarray, chunk: int = 256) -> Neighbours:
        """The weighted-median answer per query row; NaN where the index is empty."""
        text = np.asarray(text, np.float32).reshape(-1, self.text_dim)
        shape = np.asarray(shape, np.float32).reshape(-1, self.shape_dim)
        b = len(text)
        out = Neighbours(np.full(b, np.nan, np.float32), np.full(b, np.inf, np.float32),
                         np.full(b, np.inf, np.float32), np.zeros(b, np.int64), np.full(b, -1, np.int64))  # fmt: skip
        if self._n == 0 or b == 0:
            return out
        k = min(self.k, self._n)
        for lo in range(0, b, chunk):
            hi = min(b, lo + chunk)
            d2 = self.distances(text[lo:hi], shape[lo:hi])
            idx = np.argpartition(d2, k - 1, axis=1)[:, :k] if k < self._n else np.tile(np.arange(self._n), (hi - lo, 1))
            nd = np.take_along_axis(d2, idx, axis=1)
            dmin = nd.min(axis=1, keepdims=True)
            w = np.exp(-(nd - dmin) / self.tau)
            out.log_duration[lo:hi] = weighted_median(self.log_durations[idx], w)
            out.mean_d2[lo:hi] = nd.mean(axis=1)
            out.min_d2[lo:hi] = dmin[:, 0]
            out.count[lo:hi] = k
            out.nearest[lo:hi] = idx[np.arange(hi - lo), nd.argmin(axis=1)]
        return out
