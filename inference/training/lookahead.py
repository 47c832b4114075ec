"""A lookahead teacher for the fill sequences: FGD, corrected by short rollouts of the future.

Imitating FGD can at best tie with it. This teacher knows the arrival sequence (privileged
information a teacher may use; the student only sees the state) and, once the cluster is
filling up (arrived demand ≥ ``start`` of the capacity, where choices start to cost pods),
tries a few candidate nodes for the pod — FGD's pick, then the best-scoring nodes of OTHER
node states (nodes in identical states give identical futures) — by placing it there and
rolling the base policy over the next ``horizon`` pods on a copy. The candidate that places
the most GPU demand wins; ties keep FGD's pick. Its ``score`` marks the winner above every
other node, so :class:`inference.training.collect.RecordingPolicy` records it as the target
and the teacher can drive the fill benchmark itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduling.assign import place_one
from scheduling.fill import gpu_demand
from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import Workload, cluster_fragmentation
from scheduling.policies.base import BasePolicy, Policy
from scheduling.snapshot import ClusterSnapshot
from scheduling.step_result import Placement


class LookaheadTeacher(BasePolicy):
    name = "lookahead"

    def __init__(self, base: Policy, sequence: Sequence[JobRequest], capacity_milli: int, *, horizon: int = 60,
                 candidates: int = 3, start: float = 0.85, workload: Workload | None = None,
                 margin: float = 0.0) -> None:  # fmt: skip
        """``workload``: also count the fragmentation left after the rollout (value = GPU milli
        placed − cluster fragmentation, :mod:`scheduling.metrics.fragmentation`), a finer signal
        than the placed demand alone; ``margin``: milli-GPU a candidate must gain over the base's pick."""
        self.base = base
        self.workload = workload
        self.margin = margin
        self.sequence = list(sequence)
        self.position = {p.job_id: i for i, p in enumerate(self.sequence)}
        self.arrived = np.cumsum([gpu_demand(p) for p in self.sequence]) / capacity_milli
        self.horizon = horizon
        self.candidates = candidates
        self.start = start
        self.deviations = 0  # decisions where the rollouts overruled the base
        self.decisions = 0  # decisions that ran rollouts

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        choose = getattr(self.base, "select_gpus", None) or best_fit_gpus
        return choose(snapshot, node_index, job)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        scores = np.asarray(self.base.score(job, snapshot, feasible_mask), dtype=np.float64)
        i = self.position.get(job.job_id)
        masked = np.where(feasible_mask, scores, -np.inf)
        if i is None or self.arrived[i] < self.start or not np.isfinite(masked.max(initial=-np.inf)):
            return scores
        cands = self._candidates(snapshot, masked)
        if len(cands) < 2:
            return scores
        self.decisions += 1
        future = self.sequence[i + 1:i + 1 + self.horizon]
        value = np.array([self._rollout(snapshot, job, c, future) for c in cands], dtype=np.float64)
        value[1:] -= self.margin
        best = cands[int(np.argmax(value))]  # first maximum: the base's pick on ties
        if best != cands[0]:
            self.deviations += 1
        out = scores.copy()
        out[best] = masked.max() + 1.0
        return out

    def _candidates(self, s: ClusterSnapshot, masked: np.ndarray) -> list[int]:
        """The base's pick, then the best nodes whose state differs from every earlier candidate's."""
        order = np.argsort(-masked, kind="stable")
        order = order[np.isfinite(masked[order])]
        out: list[int] = []
        seen: set[tuple] = set()
        for n in order[:200]:  # the 200 best are plenty to find a few distinct states
            key = (s.gpu_model[n], int(s.cpu_free[n]), int(s.mem_free[n]), tuple(np.sort(s.gpu_free[n])))
            if key not in seen:
                seen.add(key)
                out.append(int(n))
                if len(out) == self.candidates:
                    break
        return out

    def _rollout(self, snapshot: ClusterSnapshot, job: JobRequest, node: int, future: Sequence[JobRequest]) -> float:
        """GPU milli placed (− the fragmentation left, with a workload): ``job`` on ``node``, then
        the base policy over ``future``."""
        sim = snapshot.copy()
        sim.reserve(node, job, self.select_gpus(sim, node, job) or ())
        placed = gpu_demand(job)
        for pod in future:
            if isinstance(place_one(sim, pod, self.base, top_k=0), Placement):
                placed += gpu_demand(pod)
        if self.workload is None:
            return float(placed)
        return placed - cluster_fragmentation(sim, self.workload)
