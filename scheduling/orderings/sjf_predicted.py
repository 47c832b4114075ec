"""``sjf-predicted``: shortest job first on a *predicted* run time — deployable SJF.

A job's predicted duration is, in this order of preference:

1. ``job.runtime_estimate_s`` — what the submitter declared, when set;
2. ``context.estimator.predict(job)`` — the online duration predictor
   (:mod:`scheduling.duration_estimate`, later a learned one), when it has an answer;
3. ``default_s`` (constructor argument, default 3600 s = one hour) — a job nobody can
   predict is treated as a one-hour job: neither starved behind everything nor jumping
   ahead of jobs known to be short.

It never reads ``trace_duration_s`` (that is :mod:`sjf-oracle <scheduling.orderings.sjf_oracle>`).
A gang's duration is the longest prediction among its members. Ties → FIFO.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.job import JobRequest
from scheduling.order_context import DurationPredictor, OrderContext
from scheduling.orderings.base import sort_units
from scheduling.orderings.registry import register_ordering

DEFAULT_DURATION_S = 3600.0


def predicted_duration(job: JobRequest, estimator: DurationPredictor | None, default_s: float) -> float:
    """The duration SJF-predicted ranks ``job`` by (see the module docstring)."""
    if job.runtime_estimate_s is not None:
        return float(job.runtime_estimate_s)
    if estimator is not None:
        guess = estimator.predict(job)
        if guess is not None:
            return float(guess)
    return default_s


@register_ordering("sjf-predicted")
class SjfPredicted:
    name = "sjf-predicted"

    def __init__(self, default_s: float = DEFAULT_DURATION_S) -> None:
        if not default_s >= 0:
            raise ValueError("sjf-predicted: default_s must be >= 0")
        self.default_s = float(default_s)

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        estimator = context.estimator if context is not None else None
        memo: dict[str, float] = {}

        def duration(job: JobRequest) -> float:
            if job.job_id not in memo:
                memo[job.job_id] = predicted_duration(job, estimator, self.default_s)
            return memo[job.job_id]

        return sort_units(jobs, lambda unit: max(duration(j) for j in unit))
