"""What one scheduling step decided: placements, unschedulable jobs, compute time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Placement:
    """Job ``job_id`` goes to node ``node_id`` (index ``node_index``) on ``gpu_indices``."""

    job_id: str
    node_index: int
    node_id: str
    gpu_indices: tuple[int, ...]
    score: float
    candidates: list[tuple[str, float]]  # top-k (node_id, score), best first
    feasible_nodes: int
    reason: str


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """No node for ``job_id`` this step. ``permanent``: it can never run in this cluster;
    ``filtered_out``: no node passed the filters (rather than all scored ``-inf``)."""

    job_id: str
    reason: str
    permanent: bool = False
    filtered_out: bool = False

    def for_job(self, job_id: str) -> Unschedulable:
        """The same outcome for another job of the same shape: ``dataclasses.replace(self, job_id=…)``
        field by field, 4× faster (``schedule_step`` repeats it for every waiting job at every step)."""
        return Unschedulable(job_id, self.reason, self.permanent, self.filtered_out)


@dataclass(slots=True)
class StepResult:
    """``deferred``: job ids not considered this step (``max_placements`` reached, or its ``hold_s``);
    ``order``: every job id in the order the policy considered them."""

    placements: list[Placement] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)
    compute_ms: float = 0.0
    deferred: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)

    @property
    def placed_ids(self) -> set[str]:
        return {p.job_id for p in self.placements}
