"""What one step of the ``learned`` policy holds: the backend's answer on the step-start
state (:class:`PreparedStep`) and how the step was decided (:class:`StepStatus`, which the
worker copies onto the step's decision records)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


@dataclass
class StepStatus:
    """How the last step was decided (the worker copies it onto the step's decision records)."""

    backend: str = ""
    version: str | None = None
    fallback: bool = False
    reason: str = ""


@dataclass(eq=False)
class PreparedStep:
    """The backend's answer for one step, on the step-start state of one node table."""

    index: dict[str, int]  # job id -> row
    jobs: np.ndarray  # float32 [J, job_dim]
    scores: np.ndarray  # float32 [J, N]
    node_part: np.ndarray  # float32 [N, W]
    table: Any
    free: tuple[np.ndarray, np.ndarray, np.ndarray]  # cpu, memory, GPUs at the step start
    version: str
    outputs: dict[str, Any] = field(default_factory=dict)
    pairs: np.ndarray | None = None  # float32 [S, N, P]: the step-start pair features, one row per shape
    which: np.ndarray | None = None  # int64 [J]: each job's row of ``pairs``
    inputs: Any = None  # the step's PolicyInputs (the encoder's h is recomputed from them when asked for)
    _h: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def of(cls, jobs: Sequence[JobRequest], inputs: Any, snapshot: ClusterSnapshot,
           out: dict[str, Any]) -> PreparedStep:  # fmt: skip
        """The step of an answer; :class:`~inference.backends.BackendError` when the answer holds
        values no model should give (:func:`answer_problem`), so the step falls back and says why."""
        if problem := answer_problem(out):
            from inference.backends.base import BackendError

            raise BackendError(f"model {out.get('version') or '?'} answered {problem}")
        return cls({j.job_id: i for i, j in enumerate(jobs)}, inputs.jobs, np.asarray(out["scores"], np.float32),
                   np.asarray(out["node_part"], np.float32), snapshot.table,
                   (snapshot.cpu_free.copy(), snapshot.mem_free.copy(), snapshot.gpu_free.copy()),
                   str(out.get("version", "")), out, inputs.pairs, inputs.which, inputs)  # fmt: skip

    def h(self, model: Any, topologies: Any = None) -> np.ndarray:
        """float32 ``[N, H]``: the step's h_t — the answer's ``h`` when it has one, else the fusion
        encoder of ``model`` (the version that answered) on the step's inputs, computed once
        (``topologies``: a :class:`~inference.model.step.TopologyCache` to take G_t from)."""
        if self._h is None:
            if "h" in self.outputs:
                self._h = np.asarray(self.outputs["h"], np.float32)
            else:
                from inference.model.step import encode_step

                h = encode_step(model, self.inputs, topologies)
                self._h = h.cpu().numpy().astype(np.float32, copy=False)
        return self._h

    def psi(self, job_id: str, node_index: int, model: Any = None) -> np.ndarray | None:
        """float32 ``[cost_dim]``: the cost estimator ψ of placing ``job_id`` on ``node_index`` at the
        step's start. The answer's, for the job's best-scored nodes
        (:data:`inference.model.step.COST_TOP`); for another node (earlier placements of the step
        moved the scores, or it tied with them), ``model``'s cost head on the step's node term and
        pair features — pass it only when it is the version that answered. ``None`` without ψ in
        the answer, for a job the step did not score, and for another node without ``model``."""
        cost, i = self.outputs.get("cost"), self.index.get(job_id)
        if cost is None or i is None:
            return None
        hit = np.flatnonzero(np.asarray(self.outputs["cost_nodes"])[i] == node_index)
        if len(hit):
            return np.asarray(cost)[i, hit[0]]
        if model is None or self.pairs is None or self.which is None:
            return None
        from inference.model.step import cost_at

        return cost_at(model, self.node_part[node_index], self.jobs[i], self.pairs[self.which[i], node_index])

    def changed(self, s: ClusterSnapshot) -> np.ndarray:
        """bool ``[N]``: nodes whose free capacity differs from the step start."""
        cpu, mem, gpu = self.free
        return (s.cpu_free != cpu) | (s.mem_free != mem) | (s.gpu_free != gpu).any(axis=1)


def answer_problem(out: dict[str, Any]) -> str | None:
    """What is wrong with a policy answer's values, or ``None``: a score that is NaN or ``+inf``
    (``-inf`` is a pair the model did not score), a node term, ψ or h that is not finite — a
    diverged version, or a corrupt answer. Without this check a NaN score reads as a veto, so
    the jobs would wait with no fallback taking over, and ``+inf`` would reach a decision record."""
    scores = np.asarray(out["scores"])
    top = scores.max() if scores.size else -np.inf  # NaN when any is (one pass; counted only when wrong)
    if np.isnan(top) or top == np.inf:
        return f"{int(np.count_nonzero(np.isnan(scores) | np.isposinf(scores)))} of {scores.size} scores NaN or +inf"
    for name in ("node_part", "cost", "h"):
        if name in out and not np.isfinite(values := np.asarray(out[name])).all():
            return f"{int(np.count_nonzero(~np.isfinite(values)))} non-finite values in {name!r}"
    return None
