"""What the worker's decision records read from the ``learned`` policy after a step
(:class:`DecisionEstimates`, a part of :class:`inference.policy.LearnedPolicy`): the cost estimator ψ's
fragmentation and run time of a placement, and the model version whose call scored the job."""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.prepared_step import PreparedStep
from inference.step_windows import StepWindows


class DecisionEstimates:
    """Reads the step just run (its windows' calls); a job the fallback scored has none."""

    _windows: StepWindows
    _in_step: bool
    _step: PreparedStep | None
    fallback_jobs: set[str]
    model_version: Any
    loaded: Any

    def predicted_cost(self, job_id: str, node_index: int) -> float | None:
        """ψ of placing ``job_id`` on ``node_index`` (the fragmentation it adds, in GPUs), as the
        cost estimator saw the cluster at the call that scored the job (the step's start, or where
        the step was when that window opened); ``None`` without a cost head or a step, for a job the
        step's call did not score, and for a node outside the answer's best-scored ones when this
        worker does not hold the version that answered (:meth:`_psi`)."""
        psi = self._psi(job_id, node_index)
        return None if psi is None or not np.isfinite(psi[0]) else float(psi[0])

    def predicted_run_time(self, job_id: str, node_index: int) -> float | None:
        """ψ's expected run time of ``job_id`` on ``node_index``, s (its second column); ``None`` as
        for :meth:`predicted_cost`, for a ψ without that column, and where the estimate is not a
        finite number of seconds (a record field must be)."""
        psi = self._psi(job_id, node_index)
        if psi is None or len(psi) < 2 or not np.isfinite(psi[1]) or psi[1] > 700.0:  # expm1 overflows past ~709
            return None
        return float(np.expm1(max(float(psi[1]), 0.0)))

    def scored_version(self, job_id: str) -> str | None:
        """The model version whose call scored ``job_id`` in the step just run: a later window of the
        step may have been answered by another version (a server swapped it in) or have failed, which
        :attr:`last_step` then says. ``None`` for a job the fallback scored and one no call scored."""
        step = self._scored_by(job_id)
        return None if step is None else step.version or self.model_version

    def _scored_by(self, job_id: str) -> PreparedStep | None:
        """The call ``job_id`` was scored from; not a job the fallback scored (a later window failing
        leaves the earlier ones' answers as they were)."""
        step = self._windows.scored_by.get(job_id) if self._in_step else self._step
        return None if step is None or job_id in self.fallback_jobs else step

    def _psi(self, job_id: str, node_index: int) -> np.ndarray | None:
        """ψ on the step-start state (:meth:`PreparedStep.psi`; the local cost head for nodes outside
        the answer's, when this worker holds the version that answered)."""
        step = self._scored_by(job_id)
        if step is None:
            return None
        same = not step.version or step.version == self.model_version
        return step.psi(job_id, node_index, self.loaded.model if same else None)
