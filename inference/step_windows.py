"""The model calls of one scheduling step of the ``learned`` policy, window by window.

A call covers at most ``size`` jobs (default 256, ``$SEMSCHED_MODEL_WINDOW``; 0: the whole
queue): the first of the step's order, which are the jobs the step places first. They are
also the call's job tokens and queue summary. A job of the step beyond the window that
reaches scoring (the filters found it a node) opens the next window, from it on, on the
cluster as the step's placements left it; a job an earlier window covers is scored from it,
re-scored where placements moved its nodes (:mod:`inference.rescoring`). So a call's cost is
bounded however long the queue grows: behind a saturated cluster most pending jobs fit
nowhere and are never scored, and scoring them all cost every step J × N scores (the
learned dlrm2025 replay spent 62 % of its time there, 2026-12-02).

**A window holds the jobs that can be placed.** Its jobs are the next ones of the order that
the default filters (:mod:`scheduling.filters`: capacity, GPU share and model, health, an
app's instances per node) let onto some node of the cluster as the call sees it
(:mod:`scheduling.filters.fits_somewhere`): within a step
free capacity only shrinks and instances only grow, so a job that fits nowhere then is turned
away and never scored. Behind a saturated head of the queue the call covers the jobs the step places instead
of the head's, which a later window would have had to call for again, synchronously (in the
worker's loop, a Triton round trip). When nothing in the queue fits anywhere the worker's step
calls no model at all. (A window of 0, the whole queue, keeps every job.)

:class:`StepWindows` is that bookkeeping, one object per step (the policy replaces it when a
step begins, so a warm-up that puts the policy's step state back puts this back whole).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence

import numpy as np

from inference.prepared_step import PreparedStep
from inference.step_budget import StepBudget
from scheduling.filters.fits_somewhere import FitsSomewhere
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

WINDOW_ENV = "SEMSCHED_MODEL_WINDOW"
DEFAULT_WINDOW = 256  # jobs per model call (the reference queue)


def model_window(window: int | None = None) -> int:
    """Jobs per model call: ``window``, else ``$SEMSCHED_MODEL_WINDOW``, else 256 (0: the whole queue)."""
    raw: object = window if window is not None else os.environ.get(WINDOW_ENV) or DEFAULT_WINDOW
    what = f"model window {raw!r}" if window is not None else f"{WINDOW_ENV}={raw!r}"
    try:
        value = int(raw)  # type: ignore[call-overload]
    except ValueError:
        raise ValueError(f"{what}: expected a whole number of jobs (0: the whole queue)") from None
    if value < 0:
        raise ValueError(f"{what}: expected >= 0 jobs (0: the whole queue)")
    return value


def window_of(jobs: Sequence[JobRequest], start: int, size: int) -> Sequence[JobRequest]:
    """The jobs of one model call: ``size`` of ``jobs`` from ``start`` (all of them with ``size`` 0)."""
    return jobs[start : start + size] if size else jobs[start:]


def fitting_window(jobs: Sequence[JobRequest], start: int, size: int, snapshot: ClusterSnapshot,
                   fits: FitsSomewhere | None = None) -> list[JobRequest]:
    """Up to ``size`` jobs of ``jobs`` from ``start`` on that the default filters let onto some node
    of ``snapshot`` (module docstring; ``fits``: the step's answers so far), in their order; every
    job from ``start`` with ``size`` 0. An unsaturated queue is read no further than its first ``size`` jobs."""
    if not size:
        return list(jobs[start:])
    return (fits or FitsSomewhere()).first(itertools.islice(jobs, start, None), snapshot, size)


class StepWindows:
    """One step's order and the calls that cover it: which call scores each job, and which scored it."""

    def __init__(self, ordered: Sequence[JobRequest] = (), now: float = 0.0, size: int = DEFAULT_WINDOW,
                 utilisation: np.ndarray | None = None, budget: StepBudget | None = None) -> None:  # fmt: skip
        self.ordered = list(ordered)
        self.now = now
        self.size = size
        self.utilisation = utilisation  # the step's, for the windows it opens
        self.budget = budget  # a remote backend's step deadline, what is left of it (inference/step_budget.py)
        self.calls: list[PreparedStep] = []  # the step's model calls, in call order
        self.position = {j.job_id: i for i, j in enumerate(self.ordered)}  # job id -> its place in the order
        self.covering: dict[str, PreparedStep] = {}  # job id -> the step's latest call that covers it
        self.scored_by: dict[str, PreparedStep] = {}  # job id -> the call its scores came from (its ψ)
        self.scored: set[str] = set()  # the step's jobs scored so far (placed, or tried)
        self.fits = FitsSomewhere()  # which shapes fit nowhere any more in this step

    def cover(self, call: PreparedStep) -> None:
        """``call`` is a call of this step: its jobs are scored from it from now on."""
        self.calls.append(call)
        self.covering.update(dict.fromkeys(call.index, call))

    def opening_at(self, job: JobRequest, snapshot: ClusterSnapshot) -> Sequence[JobRequest]:
        """The jobs of the window that ``job`` (which reached scoring) opens on ``snapshot`` as the step
        left it: ``job``, then the next of the order that fit somewhere (:func:`fitting_window`);
        ``job`` alone if it is not in the step's order."""
        pos = self.position.get(job.job_id)
        if pos is None:
            return [job]
        if not self.size:
            return window_of(self.ordered, pos, 0)
        return [job, *fitting_window(self.ordered, pos + 1, self.size - 1, snapshot, self.fits)] if self.size > 1 else [job]

    def later(self, job: JobRequest) -> Iterator[JobRequest]:
        """The jobs of the order after ``job`` not yet scored in this step (lazily; none outside the order)."""
        pos = self.position.get(job.job_id)
        if pos is None:
            return iter(())
        return (j for j in self.ordered[pos + 1 :] if j.job_id not in self.scored)

    def covered_row(self, job: JobRequest) -> np.ndarray | None:
        """``job``'s feature row from the call that covers it, if one does."""
        call = self.covering.get(job.job_id)
        return None if call is None else call.jobs[call.index[job.job_id]]
