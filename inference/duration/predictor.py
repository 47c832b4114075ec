"""``LearnedDurationPredictor``: regression on the job's embedding and resources, blended with
the run times of the most similar finished jobs (issue 4 point 3).

Implements :class:`scheduling.order_context.LearningDurationPredictor`: ``predict(job)``
answers in seconds; ``observe(job, run_time_s)`` adds a finished job to the retrieval index,
so the predictor keeps learning online (the MLP is fixed between trainings; the index is
not). ``sjf-learned`` (:mod:`inference.duration.ordering`) ranks pending jobs by it.

The answer, in log seconds (``mode`` picks one; :meth:`components` returns all three):

- ``regression``: the MLP (:mod:`inference.duration.regression`) plus ``regression_shift``;
- ``retrieval``: the weighted median of the k nearest finished jobs
  (:mod:`inference.duration.retrieval`);
- ``pair``: ``a · retrieval + (1 − a) · regression`` with
  ``a = blend_max · exp(−mean d² / blend_scale)`` — retrieval counts when its neighbours are
  close (the same app, user or program with the same shape), the regression otherwise;
- ``blend`` (default): ``(1 − w) · pair + w · history`` where the job's most specific exact
  key (the same request, app or program: :meth:`~inference.duration.history.KeyHistory.specific`)
  has ``history_min_count`` finished jobs, else ``pair`` (``w = history_weight``; 0 = ``pair``).

All four parameters are chosen on a time-ordered validation split by
:func:`~inference.duration.train.train_predictor`; ``observe`` feeds the index and the
histories alike.

Before anything is observed, retrieval has no answer and the blend is the regression; a
predictor without a regression (``mode="retrieval"``, untrained) answers ``None`` until its
first observation (``sjf-predicted`` then uses its default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inference.duration.config import DurationConfig
from inference.duration.features import SHAPE_DIM, JobFeaturiser
from inference.duration.history import KeyHistory
from inference.duration.regression import MlpRegressor
from inference.duration.retrieval import NeighbourIndex
from inference.encoders import EncoderCache, get_encoder
from inference.encoders.base import TextEncoder
from scheduling.job import JobRequest


@dataclass
class Components:
    """Per job, log seconds: the regression, the retrieval (NaN: no neighbours), the weight
    ``alpha`` of the retrieval in the two-way blend, the answer (``blend``), the mean d² of the
    neighbours, the two-way blend (``pair``) and the most specific key's history (NaN: none)."""

    regression: np.ndarray
    retrieval: np.ndarray
    alpha: np.ndarray
    blend: np.ndarray
    mean_d2: np.ndarray
    pair: np.ndarray
    history: np.ndarray

    def answer(self, mode: str) -> np.ndarray:
        return {"regression": self.regression, "retrieval": self.retrieval, "blend": self.blend,
                "pair": self.pair}[mode]  # fmt: skip


def make_encoder(name: str, dim: int) -> EncoderCache:
    """The (cached) text encoder a config names."""
    return EncoderCache(get_encoder(name, dim))


def blend_answers(config: DurationConfig, has_regressor: bool, reg: np.ndarray, retr: np.ndarray,
                  mean_d2: np.ndarray, hist: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """``(alpha, pair, blend)`` in log seconds from the regression (``reg``, shifted), the retrieval (``retr``,
    NaN: no neighbours), its neighbours' mean d² and the key history (``hist``, NaN: none): the module
    docstring's formulas, one definition for :meth:`LearnedDurationPredictor.components_of` and the Gittins
    ordering's blend (``inference.duration.gittins``)."""
    have = ~np.isnan(retr)
    alpha = np.where(have, config.blend_max * np.exp(-mean_d2 / config.blend_scale), 0.0)
    if not has_regressor:
        alpha = np.where(have, 1.0, 0.0)
    pair = np.where(have, alpha * np.nan_to_num(retr) + (1 - alpha) * np.nan_to_num(reg), reg)
    w = config.history_weight
    blend = np.where(np.isnan(hist), pair, (1 - w) * pair + w * np.nan_to_num(hist)) if w > 0 else pair
    return alpha, pair, blend


FEATURE_CACHE_JOBS = 200_000  # jobs whose features are kept (the cache starts over past it)


class LearnedDurationPredictor:
    def __init__(self, config: DurationConfig, *, encoder: TextEncoder | None = None,
                 regressor: MlpRegressor | None = None) -> None:  # fmt: skip
        self.config = config
        self.encoder = encoder if encoder is not None else make_encoder(config.encoder, config.text_dim)
        if self.encoder.dim != config.text_dim:
            raise ValueError(f"encoder dim {self.encoder.dim} != config text_dim {config.text_dim}")
        self.featuriser = JobFeaturiser(self.encoder)
        self.regressor = regressor
        self.index = NeighbourIndex(config.text_dim, SHAPE_DIM, k=config.k, tau=config.tau,
                                    text_weight=config.text_weight, shape_weight=config.shape_weight,
                                    recency=config.recency, max_rows=config.max_rows)  # fmt: skip
        self.history = KeyHistory(config.history_window)
        self._features: dict[JobRequest, tuple[np.ndarray, np.ndarray, float]] = {}

    @property
    def version(self) -> str:
        return self.config.version

    # -- features, cached per job ---------------------------------------------------------------
    def features(self, jobs: Sequence[JobRequest]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(text [n, D], shape [n, S], regression log-seconds [n])``; cached per job."""
        missing = [j for j in dict.fromkeys(jobs) if j not in self._features]
        if missing:
            text, shape = self.featuriser(missing)
            reg = (self.regressor.predict(np.concatenate([text, shape], axis=1))
                   if self.regressor is not None else np.full(len(missing), np.nan))  # fmt: skip
            fresh = {j: (t, s, float(r)) for j, t, s, r in zip(missing, text, shape, reg, strict=True)}
            if len(self._features) + len(missing) > FEATURE_CACHE_JOBS:  # start over, keeping this call's jobs
                # (found by review: only the missing ones were kept, and a cached job asked again beside a
                # new one raised KeyError: a failed step in the worker, a whole simulator run ended)
                self._features = {j: self._features.get(j) or fresh[j] for j in dict.fromkeys(jobs)}
            self._features.update(fresh)
        rows = [self._features[j] for j in jobs]
        if not rows:
            return (np.zeros((0, self.config.text_dim), np.float32), np.zeros((0, SHAPE_DIM), np.float32),
                    np.zeros(0))  # fmt: skip
        return (np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]),
                np.array([r[2] for r in rows], dtype=np.float64))  # fmt: skip

    def log_target(self, durations: Sequence[float] | np.ndarray) -> np.ndarray:
        return np.log(np.maximum(np.asarray(durations, np.float64), self.config.min_duration_s))

    # -- the LearningDurationPredictor protocol -------------------------------------------------
    def observe(self, job: JobRequest, duration_s: float) -> None:
        """Add a finished job (its run time in seconds) to the retrieval index."""
        self.observe_many([job], [duration_s])

    def observe_many(self, jobs: Sequence[JobRequest], durations: Sequence[float]) -> None:
        d = np.asarray(durations, np.float64)
        if len(d) != len(jobs):
            raise ValueError("one duration per job")
        if not np.all(np.isfinite(d) & (d >= 0)):
            raise ValueError("durations must be finite numbers >= 0")
        text, shape, _ = self.features(jobs)
        y = self.log_target(d)
        self.index.add(text, shape, y)
        self.history.observe_many(jobs, y)

    def predict(self, job: JobRequest) -> float | None:
        """Predicted run time in seconds, ``None`` when there is nothing to go on."""
        v = float(self.predict_many([job])[0])
        return None if math.isnan(v) else v

    # -- batch API -------------------------------------------------------------------------------
    def components(self, jobs: Sequence[JobRequest]) -> Components:
        text, shape, reg = self.features(jobs)
        return self.components_of(text, shape, reg, self.history.specific(jobs, self.config.history_min_count))

    def components_of(self, text: np.ndarray, shape: np.ndarray, reg: np.ndarray,
                      history: np.ndarray | None = None) -> Components:  # fmt: skip
        """:meth:`components` from feature rows: ``reg`` is the regressor's log seconds (NaN without one),
        ``history`` the most specific key's (:meth:`KeyHistory.specific`); ``None``: rows name no job, so
        no key has a history and ``blend`` is ``pair`` (the ``predictor`` Triton model's case)."""
        reg = np.asarray(reg, np.float64) + self.config.regression_shift
        nb = self.index.query(text, shape)
        retr = nb.log_duration.astype(np.float64)
        hist = np.full(len(reg), np.nan) if history is None else history
        alpha, pair, blend = blend_answers(self.config, self.regressor is not None, reg, retr, nb.mean_d2, hist)
        return Components(reg, retr, alpha, blend, nb.mean_d2.astype(np.float64), pair, hist)

    def predict_many(self, jobs: Sequence[JobRequest], mode: str | None = None) -> np.ndarray:
        """float64 ``[n]`` seconds (NaN = no answer) under ``mode`` (default: the config's)."""
        if not jobs:
            return np.zeros(0)
        mode = mode or self.config.mode
        if mode == "regression" and self.regressor is None:
            return np.full(len(jobs), np.nan)
        return np.exp(self.components(jobs).answer(mode))

    def explain(self, job: JobRequest) -> tuple[float | None, str]:
        """``(prediction, where it came from)`` for ``semsched explain`` and the tests."""
        c = self.components([job])
        parts = [f"{self.config.mode} ({self.version})"]
        if self.regressor is not None:
            parts.append(f"regression {math.exp(c.regression[0]):.0f} s")
        if not math.isnan(c.retrieval[0]):
            parts.append(f"{self.index.k} nearest of {len(self.index)} finished: median {math.exp(c.retrieval[0]):.0f} s "
                         f"(mean d² {c.mean_d2[0]:.3f}), weight {c.alpha[0]:.2f}")  # fmt: skip
        if self.config.history_weight > 0 and not math.isnan(c.history[0]):
            parts.append(f"same request/app/program: median {math.exp(c.history[0]):.0f} s, "
                         f"weight {self.config.history_weight:.2f}")  # fmt: skip
        return self.predict(job), ", ".join(parts)

    def __repr__(self) -> str:
        return f"<LearnedDurationPredictor {self.version} {self.config.mode} index={len(self.index)}>"
