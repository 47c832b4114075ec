"""One scheduling step featurised: s_t, q_t, G_t and the feasibility mask, together.

The feasibility mask is the scheduling core's own (:func:`scheduling.filters.framework.run_filters`),
one row per job, so the model can never rank an action the filters reject.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inference.encoders.base import TextEncoder
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.spec import FeatureSpec
from inference.features.topology import Topology, build_topology
from scheduling.filters.base import Filter
from scheduling.filters.framework import run_filters
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


@dataclass(frozen=True, eq=False)
class StepFeatures:
    nodes: np.ndarray  # float32 [N, spec.node_dim]
    jobs: np.ndarray  # float32 [J, spec.job_dim]
    topology: Topology
    feasible: np.ndarray  # bool [J, N]


def feasibility(jobs: Sequence[JobRequest], snapshot: ClusterSnapshot,
                filters: Sequence[Filter] | None = None) -> np.ndarray:  # fmt: skip
    """bool ``[J, N]``: the filters' verdict per job (a loop over jobs; each row vectorised over nodes)."""
    out = np.zeros((len(jobs), snapshot.num_nodes), dtype=bool)
    for i, job in enumerate(jobs):
        out[i] = run_filters(job, snapshot, filters, explain=False).feasible_mask
    return out


def featurise_step(snapshot: ClusterSnapshot, jobs: Sequence[JobRequest], now: float, spec: FeatureSpec,
                   encoder: TextEncoder, *, filters: Sequence[Filter] | None = None,
                   utilisation: np.ndarray | None = None, k: int = 8) -> StepFeatures:  # fmt: skip
    return StepFeatures(
        nodes=node_state(snapshot, spec, utilisation),
        jobs=job_demand(jobs, now, spec, encoder),
        topology=build_topology(snapshot, spec, k),
        feasible=feasibility(jobs, snapshot, filters),
    )
