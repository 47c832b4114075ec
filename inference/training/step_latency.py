"""The model-step latency a model version is judged on before promotion.

What is timed is one scheduling step's model call, as the worker makes it once per step
(and as ``semsched bench learned`` reports it as "model step"): the inputs
(:func:`inference.model.step.build_inputs`: node state, topology, job rows, pair features per
distinct job shape) and one call of the backend (the fusion encoder once, the head over every
(job, node)). The setting is the issue's: N pending pods (256) on a cluster loaded to a share
of its GPUs (70 %: :func:`loaded_snapshot`, best-fit placing the fill sequence of seed 0) —
the caller passes the nodes and pods (``ops``: the 1,213 openb GPU nodes and the openb pods).

One untimed warm-up call (it also fills the text-embedding cache), then ``repeat`` timed
calls; p50 / p99 over them (``numpy.percentile``). Numbers depend on the machine and on
torch's thread count (recorded with them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot


def loaded_snapshot(nodes: Sequence[NodeView], pods: Sequence[JobRequest], fraction: float = 0.7,
                    seed: int = 0) -> ClusterSnapshot:  # fmt: skip
    """The cluster after best-fit placed the fill sequence of ``seed`` up to ``fraction`` of its GPUs."""
    from scheduling.assign import place_one
    from scheduling.fill import fill_sequence, gpu_demand
    from scheduling.policies import get_policy

    snap = ClusterSnapshot.from_nodes(nodes)
    capacity = int(snap.gpu_cap_milli.sum())
    policy, arrived = get_policy("best-fit"), 0
    for pod in fill_sequence(pods, capacity, seed):
        if arrived + gpu_demand(pod) > fraction * capacity:
            break
        arrived += gpu_demand(pod)
        place_one(snap, pod, policy, top_k=0)
    return snap


def model_step(policy: Any, snap: ClusterSnapshot, jobs: Sequence[JobRequest], *,
               pair_cache: Any = None) -> dict[str, float]:  # fmt: skip
    """One step's model call in ms for a :class:`~inference.policy.LearnedPolicy`: ``inputs``,
    ``model`` and their sum ``model step`` (the filters' masks are the scheduling core's, not timed).
    Without ``pair_cache`` the pair features are computed afresh (what promotion times: the same
    state again and again would make a cache look free); ``ops.bench.learned_steps`` passes the
    policy's, over steps with placements and departures between them."""
    from inference.model.step import build_inputs

    t0 = time.perf_counter()
    inputs = build_inputs(snap, jobs, 0.0, policy.spec, policy.encoder(), knn=policy.loaded.config.knn,
                          pair_cache=pair_cache)  # fmt: skip
    t1 = time.perf_counter()
    policy.backend.policy(inputs)
    t2 = time.perf_counter()
    return {"inputs": (t1 - t0) * 1000, "model": (t2 - t1) * 1000, "model step": (t2 - t0) * 1000}


@dataclass(frozen=True)
class LatencyProbe:
    """The loaded cluster and the pending jobs one step's model call is timed on."""

    snapshot: ClusterSnapshot
    jobs: tuple[JobRequest, ...]
    repeat: int = 30

    @classmethod
    def build(cls, nodes: Sequence[NodeView], pods: Sequence[JobRequest], *, pending: int = 256, load: float = 0.7,
              seed: int = 0, repeat: int = 30) -> LatencyProbe:  # fmt: skip
        """``pending`` pods (the pod list's first, cycled) on ``nodes`` loaded to ``load`` of their GPUs."""
        if not pods or pending < 1 or repeat < 1:
            raise ValueError("the latency probe needs pods, pending >= 1 and repeat >= 1")
        jobs = tuple(pods[i % len(pods)] for i in range(pending))
        return cls(loaded_snapshot(nodes, pods, load, seed), jobs, repeat)

    def describe(self) -> dict[str, Any]:
        snap = self.snapshot
        used = 1 - float(snap.gpu_free_milli.sum()) / max(1.0, float(snap.gpu_cap_milli.sum()))
        return {"pending": len(self.jobs), "nodes": snap.num_nodes, "gpu_used_pct": round(100 * used, 1),
                "repeat": self.repeat}  # fmt: skip


def measure_step_latency(policy: Any, probe: LatencyProbe) -> dict[str, Any]:
    """p50 / p99 (ms) of ``policy``'s model step on ``probe`` (module docstring); JSON-able."""
    import torch

    model_step(policy, probe.snapshot, probe.jobs)  # warm-up: caches, lazy initialisation
    samples = [model_step(policy, probe.snapshot, probe.jobs) for _ in range(probe.repeat)]
    step = np.array([s["model step"] for s in samples])
    return probe.describe() | {
        "p50_ms": float(np.percentile(step, 50)), "p99_ms": float(np.percentile(step, 99)),
        "mean_ms": float(step.mean()),
        "inputs_p50_ms": float(np.percentile([s["inputs"] for s in samples], 50)),
        "model_p50_ms": float(np.percentile([s["model"] for s in samples], 50)),
        "torch_threads": torch.get_num_threads(),
    }  # fmt: skip
