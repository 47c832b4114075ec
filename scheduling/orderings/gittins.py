"""``gittins``: the Gittins index over a *predictive distribution* of each job's run time.

For a job whose run time ``S`` is unknown but drawn from a known distribution, and which has
already run ``a`` seconds, the Gittins index (Gittins; Aalto, Ayesta & Righter 2009) is

    G(a) = sup_Δ  P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]

— the best completion probability per unit of service the job can offer over any service
quantum ``Δ``. Serving the highest index first minimises the mean response time of an M/G/1
queue among policies that do not know sizes; with a known size it is SRPT (``1 / remaining``)
and with a decreasing-hazard distribution it is least attained service.

The distribution is given by **weighted samples** (``[n, k]`` seconds, NaN = no sample): the
run times of a job's nearest past jobs, or quantiles of a log-normal. For samples the sup is
attained at a sample point — between two support points the numerator is flat while the
denominator grows — so :func:`gittins_index` evaluates the ratio at each sorted remaining
value (a cumulative sum) and takes the row maximum: ``O(n k log k)``, no Python loop per job.

**Restart vs resume.** The simulator restarts a preempted job from scratch (no checkpoint), so
what remains of a job that ran ``e`` seconds is ``S`` itself, knowing ``S > e``
(``restart=True``, the default here); ``restart=False`` is the textbook ``S − a`` (a resumable
job). A pending job that never ran has ``a = 0`` and both coincide. Note that this ordering
exposes no ``queue_of``: the simulator does not preempt for it, so every pending job it ranks
has run at most in an earlier, preempted attempt of another policy's — in practice ``a = 0``,
and the index is ``G(0)``.

Where the samples come from (:class:`Gittins`): ``context.estimator.predict_samples(jobs)``
when the estimator has it (:class:`SampleDurationPredictor`), else the point estimate of
``sjf-predicted`` (declared ``runtime_estimate_s``, ``estimator.predict``, ``default_s``)
spread as a log-normal with ``sigma`` (``sigma=0``: one sample, i.e. SRPT on the estimate). A
job whose samples all lie at or below its executed time has outlived its distribution: its
remaining time is taken to be the time it already ran (a heavy, Pareto-like tail), index
``1 / a``.

``rule`` picks what is computed from the same samples (``"gittins"``; ``"mean"``: ``1 /
E[remaining]``, shortest expected remaining first, the non-preemptive cμ rule;
``"quantile"``: ``1 / q``-quantile of the remaining time, ``q = quantile``). A gang is ranked
by its member with the lowest index (it holds everything until the slowest finishes). Ties →
FIFO.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Protocol, runtime_checkable

import numpy as np

from scheduling.job import JobRequest
from scheduling.order_context import EMPTY_CONTEXT, OrderContext, service_rate
from scheduling.orderings.base import sort_units
from scheduling.orderings.registry import register_ordering
from scheduling.orderings.sjf_predicted import DEFAULT_DURATION_S, predicted_duration

RULES = ("gittins", "mean", "quantile")
TINY = 1e-9  # seconds: a remaining time is never taken below this (no division by zero)


@runtime_checkable
class SampleDurationPredictor(Protocol):
    def predict_samples(self, jobs: Sequence[JobRequest]) -> tuple[np.ndarray, np.ndarray]:
        """``(samples [n, k] seconds, weights [n, k] >= 0)``: each job's predictive distribution
        of its run time; NaN samples (or zero weights) are ignored, a row of only NaN = no idea."""
        ...


def normal_quantiles(points: int) -> np.ndarray:
    """``points`` equally likely standard-normal quantiles (mid-point rule), ascending."""
    nd = NormalDist()
    return np.array([nd.inv_cdf((i + 0.5) / points) for i in range(points)])


def lognormal_samples(median_s: np.ndarray, sigma: np.ndarray | float, points: int) -> np.ndarray:
    """``[n, points]`` equally weighted samples of log-normals with these medians (seconds) and
    log-space standard deviations; ``sigma = 0`` → ``points`` copies of the median."""
    med = np.asarray(median_s, np.float64).reshape(-1, 1)
    sig = np.broadcast_to(np.asarray(sigma, np.float64), med.shape[:1]).reshape(-1, 1)
    return med * np.exp(sig * normal_quantiles(points)[None, :])


def _remaining(samples: np.ndarray, weights: np.ndarray | None, age: np.ndarray,
               restart: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Sorted remaining times (``inf`` where excluded), their normalised conditional weights, and
    a mask of the rows with some sample beyond ``age``."""
    s = np.asarray(samples, np.float64)
    if s.ndim != 2:
        raise ValueError("samples must be [n, k]")
    w = np.ones_like(s) if weights is None else np.broadcast_to(np.asarray(weights, np.float64), s.shape)
    a = np.asarray(age, np.float64).reshape(-1, 1)
    ok = np.isfinite(s) & (w > 0) & (s > a)
    rem = np.where(ok, np.maximum(s if restart else s - a, TINY), np.inf)
    order = np.argsort(rem, axis=1, kind="stable")
    rem = np.take_along_axis(rem, order, axis=1)
    w = np.take_along_axis(np.where(ok, w, 0.0), order, axis=1)
    total = w.sum(axis=1, keepdims=True)
    has = total[:, 0] > 0
    return rem, w / np.where(total > 0, total, 1.0), has


def gittins_index(samples: np.ndarray, weights: np.ndarray | None = None, age: np.ndarray | float = 0.0,
                  *, restart: bool = True) -> np.ndarray:  # fmt: skip
    """``[n]`` Gittins indices (1/s; higher = serve first) of jobs with run-time samples
    ``[n, k]`` (weights ``[n, k]`` or None = equal) that have run ``age`` seconds.

    NaN for a row without any sample; ``1 / age`` for a row whose samples all lie at or below
    its age (see the module docstring)."""
    s = np.asarray(samples, np.float64)
    age_v = np.broadcast_to(np.asarray(age, np.float64), s.shape[:1])
    rem, p, has = _remaining(s, weights, age_v, restart)
    cp = np.cumsum(p, axis=1)  # P(R <= r_j)
    cpr = np.cumsum(p * np.where(np.isfinite(rem), rem, 0.0), axis=1)  # E[R; R <= r_j]
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = cpr + np.where(np.isfinite(rem), rem, 0.0) * (1.0 - cp)  # E[min(R, r_j)]
        ratio = np.where(np.isfinite(rem) & (p > 0), cp / expected, 0.0)
    out = ratio.max(axis=1) if ratio.shape[1] else np.zeros(len(s))
    return _outlived(out, s, age_v, has)


def mean_index(samples: np.ndarray, weights: np.ndarray | None = None, age: np.ndarray | float = 0.0,
               *, restart: bool = True) -> np.ndarray:  # fmt: skip
    """``1 / E[remaining]`` (the Gittins index restricted to ``Δ = ∞``), same conventions."""
    s = np.asarray(samples, np.float64)
    age_v = np.broadcast_to(np.asarray(age, np.float64), s.shape[:1])
    rem, p, has = _remaining(s, weights, age_v, restart)
    mean = (p * np.where(np.isfinite(rem), rem, 0.0)).sum(axis=1)
    with np.errstate(divide="ignore"):
        return _outlived(np.where(has, 1.0 / np.maximum(mean, TINY), 0.0), s, age_v, has)


def quantile_index(samples: np.ndarray, weights: np.ndarray | None = None, age: np.ndarray | float = 0.0,
                   *, q: float = 0.25, restart: bool = True) -> np.ndarray:  # fmt: skip
    """``1 / (q-quantile of the remaining time)``: the smallest remaining value whose cumulative
    conditional weight reaches ``q``; same conventions."""
    if not 0 < q <= 1:
        raise ValueError("q must be within (0, 1]")
    s = np.asarray(samples, np.float64)
    age_v = np.broadcast_to(np.asarray(age, np.float64), s.shape[:1])
    rem, p, has = _remaining(s, weights, age_v, restart)
    if rem.shape[1] == 0:
        return _outlived(np.zeros(len(s)), s, age_v, has)
    j = np.argmax(np.cumsum(p, axis=1) >= q - 1e-12, axis=1)
    value = rem[np.arange(len(rem)), j]
    return _outlived(np.where(has, 1.0 / np.maximum(np.where(np.isfinite(value), value, 1.0), TINY), 0.0),
                     s, age_v, has)  # fmt: skip


INDEX = {"gittins": gittins_index, "mean": mean_index}


def _outlived(index: np.ndarray, samples: np.ndarray, age: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Rows without samples → NaN; rows whose samples all lie at or below their age → 1 / age."""
    any_sample = np.isfinite(samples).any(axis=1) if samples.shape[1] else np.zeros(len(samples), bool)
    out = np.where(has, index, 1.0 / np.maximum(age, TINY))
    return np.where(any_sample, out, np.nan)


def compute_index(rule: str, samples: np.ndarray, weights: np.ndarray | None, age: np.ndarray, *,
                  restart: bool, quantile: float) -> np.ndarray:  # fmt: skip
    """The index ``rule`` names (:data:`RULES`)."""
    if rule == "quantile":
        return quantile_index(samples, weights, age, q=quantile, restart=restart)
    return INDEX[rule](samples, weights, age, restart=restart)


def executed_seconds(jobs: Sequence[JobRequest], context: OrderContext) -> np.ndarray:
    """Seconds each job already ran (attained service / service rate, as ``las`` reads it)."""
    att = context.attained_service
    return np.array([float(att.get(j.job_id, 0.0)) / r if (r := service_rate(j)) > 0 else 0.0 for j in jobs])


def rank_by_index(jobs: Sequence[JobRequest], index: np.ndarray, default_index: float) -> list[JobRequest]:
    """Highest index first (NaN → ``default_index``); a gang by its lowest member; ties FIFO."""
    idx = np.where(np.isnan(index), default_index, index)
    by_id = {j.job_id: float(v) for j, v in zip(jobs, idx, strict=True)}
    return sort_units(jobs, lambda unit: -min(by_id[j.job_id] for j in unit))


@register_ordering("gittins")
class Gittins:
    name = "gittins"

    def __init__(self, default_s: float = DEFAULT_DURATION_S, sigma: float = 0.0, points: int = 16,
                 rule: str = "gittins", quantile: float = 0.25, restart: bool = True) -> None:  # fmt: skip
        """``sigma``: log-space spread put around a point estimate when the estimator has no
        ``predict_samples``; ``points``: how many log-normal quantiles then; ``rule``,
        ``quantile``, ``restart``: see the module docstring."""
        if not default_s > 0:
            raise ValueError("gittins: default_s must be > 0")
        if sigma < 0 or points < 1:
            raise ValueError("gittins: sigma must be >= 0 and points >= 1")
        if rule not in RULES:
            raise ValueError(f"gittins: rule must be one of {', '.join(RULES)}, not {rule!r}")
        if not 0 < quantile <= 1:
            raise ValueError("gittins: quantile must be within (0, 1]")
        self.default_s, self.sigma, self.points = float(default_s), float(sigma), int(points) if sigma > 0 else 1
        self.rule, self.quantile, self.restart = rule, float(quantile), bool(restart)

    def samples(self, jobs: Sequence[JobRequest], context: OrderContext) -> tuple[np.ndarray, np.ndarray | None]:
        """The predictive samples of ``jobs`` (see the module docstring)."""
        est = context.estimator
        declared = np.array([np.nan if j.runtime_estimate_s is None else float(j.runtime_estimate_s) for j in jobs])
        if isinstance(est, SampleDurationPredictor):
            s, w = est.predict_samples(jobs)
            s, w = np.array(s, np.float64), np.array(w, np.float64)
            has = ~np.isnan(declared)
            s[has] = declared[has, None]  # a declared run time is taken as known
            w[has] = 1.0
            return s, w
        point = np.array([predicted_duration(j, est, self.default_s) for j in jobs])
        return lognormal_samples(point, np.where(np.isnan(declared), self.sigma, 0.0), self.points), None

    def index(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> np.ndarray:
        ctx = context or EMPTY_CONTEXT
        samples, weights = self.samples(jobs, ctx)
        return compute_index(self.rule, samples, weights, executed_seconds(jobs, ctx), restart=self.restart,
                             quantile=self.quantile)  # fmt: skip

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        if not jobs:
            return []
        return rank_by_index(jobs, self.index(jobs, now, context), 1.0 / self.default_s)
