"""The queue summary and job tokens a served model call sees, for the recorders of training states.

Serving (:mod:`inference.step_windows`) calls the model once per *window* of a step: the first jobs of
the step's order (at most ``SEMSCHED_MODEL_WINDOW``, 256) that fit on some node as the call sees the
cluster. A job of the order beyond it that reaches scoring opens the next window, from it on, on the
cluster as the step's placements left it. A call's queue summary (``queue``) is the mean demand of its
window's jobs, and its job tokens are their rows. Its node state is the cluster's as the window opened:
within the window, placements re-score only the pair features (:mod:`inference.rescoring`), the
fusion encoder's view of the nodes stays the call's.

The recorders (:class:`inference.training.collect.RecordingPolicy` in the simulator,
:func:`inference.training.archive.reconstruct` over the archive) label the states a model learns from.
Found by review: they summarised every pending job, those that fit nowhere included, so behind a
saturated cluster serving fed the model's context a queue it had never been trained on (one step of 3
jobs that fit nowhere and 10 small ones: ``num_gpu`` 0.125 served, 0.548 trained); and they recorded
the node state after the step's earlier placements, which the served encoder never sees.
:class:`QueueWindows` opens the same windows for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from inference.step_windows import fitting_window, model_window
from scheduling.filters.fits_somewhere import FitsSomewhere
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

Rows = Callable[[Sequence[JobRequest]], np.ndarray]  # the job_demand rows of some jobs (at the step's time)
State = Callable[[ClusterSnapshot], np.ndarray]  # the node state of a snapshot (node_state with the spec)


class QueueWindows:
    """One step's windows as serving opens them: the window covering each job that reaches scoring."""

    def __init__(self, ordered: Sequence[JobRequest], rows: Rows, state: State, size: int | None = None) -> None:
        """``ordered``: the step's jobs in its order; ``rows``: their feature rows (``job_demand``
        at the step's time); ``state``: a snapshot's node state, taken as each window opens; ``size``:
        jobs per window (default: serving's, :func:`model_window`)."""
        self.ordered = list(ordered)
        self.rows = rows
        self.state = state
        self.size = model_window(size)
        self.position = {j.job_id: i for i, j in enumerate(self.ordered)}
        self.fits = FitsSomewhere()  # (as serving's: within a step free capacity only shrinks)
        self._covering: dict[str, _Window] = {}

    def window(self, job: JobRequest, snapshot: ClusterSnapshot) -> _Window:
        """The window that covers ``job``, which reaches scoring on ``snapshot`` (the step's first
        window, opened at the step's start, or the one ``job`` opens now); ``job`` alone if it is not
        in the step's order."""
        if (got := self._covering.get(job.job_id)) is not None:
            return got
        pos = self.position.get(job.job_id)
        if pos is None:
            return _Window([job], self.rows, self.state(snapshot))
        if not self._covering:  # the step's first call: its window is opened before the step places anything
            jobs = fitting_window(self.ordered, 0, self.size, snapshot, self.fits)
            if job.job_id not in {j.job_id for j in jobs}:  # (a job that fit nowhere then cannot reach scoring)
                jobs = self._opening_at(pos, snapshot)
        else:
            jobs = self._opening_at(pos, snapshot)
        window = _Window(jobs, self.rows, self.state(snapshot))
        self._covering.update(dict.fromkeys((j.job_id for j in jobs), window))
        return window

    def forget(self) -> None:
        """A placement of the step was rolled back (a gang that did not fit whole): capacity came back, so a
        shape that fit nowhere may fit again, as serving's ``LearnedPolicy.forget`` has it (found by review)."""
        self.fits = FitsSomewhere()

    def _opening_at(self, pos: int, snapshot: ClusterSnapshot) -> list[JobRequest]:
        job = self.ordered[pos]
        if not self.size:
            return self.ordered[pos:]
        return [job, *fitting_window(self.ordered, pos + 1, self.size - 1, snapshot, self.fits)] if self.size > 1 else [job]


class _Window:
    """A window's jobs, their rows and mean (computed when first asked), and the node state it opened on."""

    def __init__(self, jobs: list[JobRequest], rows: Rows, nodes: np.ndarray) -> None:
        self.jobs = jobs
        self.nodes = nodes
        self.index = {j.job_id: i for i, j in enumerate(jobs)}
        self._rows_of = rows
        self._rows: np.ndarray | None = None

    @property
    def rows(self) -> np.ndarray:
        if self._rows is None:
            self._rows = self._rows_of(self.jobs)
        return self._rows

    @property
    def summary(self) -> np.ndarray:
        """The call's ``queue`` input: the mean row of the window's jobs."""
        return self.rows.mean(axis=0)
