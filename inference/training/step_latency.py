"""The model-step latency a model version is judged on before promotion.

What is timed is one scheduling step's model call, as the worker makes it once per step
(and as ``semsched bench learned`` reports it as "model step"): the inputs
(:func:`inference.model.step.build_inputs`: node state, topology, job rows, pair features per
distinct job shape) and one call of the backend (the fusion encoder once, the head over every
(job, node)). The setting is the issue's: N pending pods (256) on a cluster loaded to a share
of its GPUs (70 %: :func:`loaded_snapshot`, best-fit placing the fill sequence of seed 0) —
the caller passes the nodes and pods (``ops``: the 1,213 openb GPU nodes and the openb pods).

Timed as the worker runs: :func:`consecutive_steps`, steps one after another with the
policy's pair cache, and between two steps ``churn`` (16) best-fit placements of pending pods,
as many arrivals from the pod list and ``churn`` departures, so the load stays where it
started and the cache recomputes what a real step would (the changed nodes, the new
shapes). One untimed first step fills the caches, then ``repeat`` timed steps; p50 / p99
over them (``numpy.percentile``). Timing one state again and again would make the pair cache
look free (nothing changes); :func:`model_step` without a cache is what ``semsched bench
learned`` reports beside it. Numbers depend on the machine and on torch's thread count
(recorded with them).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator, Sequence
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
               pair_cache: Any = None, job_rows: Any = None) -> dict[str, float]:  # fmt: skip
    """One step's model call in ms for a :class:`~inference.policy.LearnedPolicy`: ``inputs``,
    ``model`` and their sum ``model step`` (the filters' masks are the scheduling core's, not timed).
    Without ``pair_cache`` (``job_rows``) the pair features (job rows) are computed afresh (what promotion times: the same
    state again and again would make a cache look free); ``ops.bench.learned_steps`` passes the
    policy's, over steps with placements and departures between them."""
    from inference.model.step import build_inputs

    t0 = time.perf_counter()
    inputs = build_inputs(snap, jobs, 0.0, policy.spec, policy.encoder(), knn=policy.loaded.config.knn,
                          pair_cache=pair_cache, job_rows=job_rows)  # fmt: skip
    t1 = time.perf_counter()
    policy.backend.policy(inputs)
    t2 = time.perf_counter()
    return {"inputs": (t1 - t0) * 1000, "model": (t2 - t1) * 1000, "model step": (t2 - t0) * 1000}


class Churn:
    """What happens in a cluster between two steps (as the worker sees it; promotion,
    ``semsched bench learned`` and ``semsched bench triton`` time steps between them):
    ``churn`` earlier placements end, ``churn`` of the pending pods are placed (best-fit, the first
    that fit) and as many new ones arrive from the pod list. Changes ``snap`` and ``queue`` in place."""

    def __init__(self, snap: Any, queue: list[Any], pods: list[Any], churn: int, seed: int = 0) -> None:
        from scheduling.policies import get_policy

        self.snap, self.queue, self.pods, self.churn = snap, queue, pods, churn
        self.rng, self.arrivals, self.placed = np.random.default_rng(seed), len(queue), []  # type: list[Any]
        self.best_fit = get_policy("best-fit")

    def __call__(self) -> None:
        from scheduling.assign import Placement, place_one

        for _ in range(min(self.churn, len(self.placed))):
            self.snap.free(*self.placed.pop(int(self.rng.integers(len(self.placed)))))
        taken = 0
        for k, job in enumerate(list(self.queue)):
            if taken == self.churn:
                break
            result = place_one(self.snap, job, self.best_fit, top_k=0)
            if isinstance(result, Placement):
                self.placed.append((result.node_index, job, result.gpu_indices))
                self.queue[k] = self.pods[self.arrivals % len(self.pods)]
                self.arrivals, taken = self.arrivals + 1, taken + 1


def consecutive_steps(policy: Any, snap: ClusterSnapshot, pods: Sequence[JobRequest], *, pending: int, steps: int,
                      churn: int, seed: int = 0) -> dict[str, list[float]]:  # fmt: skip
    """ms per part (``inputs``, ``model``, ``model step``) of ``steps`` consecutive steps with a pair
    cache (one untimed first step fills it), :class:`Churn` between them, plus ``changed nodes``
    and ``new shapes`` per step: the nodes that moved since the previous step and the job shapes
    the cache had not seen (module docstring). ``snap`` is copied, not changed."""
    from inference.features.jobs import JobRows
    from inference.features.pair_cache import PairCache

    snap = snap.copy()
    queue = [pods[i % len(pods)] for i in range(pending)]
    between = Churn(snap, queue, list(pods), churn, seed)
    cache, rows = PairCache(), JobRows()
    samples: dict[str, list[float]] = {}
    last = (snap.cpu_free.copy(), snap.gpu_free.copy())
    with frozen_heap():
        for step in range(steps + 1):
            moved = (snap.cpu_free != last[0]) | (snap.gpu_free != last[1]).any(axis=1)  # since the last step
            last, shapes_before = (snap.cpu_free.copy(), snap.gpu_free.copy()), cache.stats.shapes_new
            parts = model_step(policy, snap, queue, pair_cache=cache, job_rows=rows)
            if step:
                parts["changed nodes"] = float(np.count_nonzero(moved))
                parts["new shapes"] = float(cache.stats.shapes_new - shapes_before)
                for name, value in parts.items():
                    samples.setdefault(name, []).append(value)
            between()
    return samples


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The process's objects out of the garbage collector's full passes while steps are timed, as
    the worker freezes its start-up heap (``streams/heap.py``): a full collection over a benchmark
    process's ~230,000 objects takes ~75 ms and would land on whichever step runs (one of 300
    steps took 78–99 ms). A heap frozen before stays frozen."""
    frozen_before = gc.get_freeze_count() > 0
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


@dataclass(frozen=True)
class LatencyProbe:
    """The loaded cluster, the pending jobs and the pods that arrive while steps are timed."""

    snapshot: ClusterSnapshot
    pods: tuple[JobRequest, ...]
    pending: int = 256
    repeat: int = 30
    churn: int = 16

    @classmethod
    def build(cls, nodes: Sequence[NodeView], pods: Sequence[JobRequest], *, pending: int = 256, load: float = 0.7,
              seed: int = 0, repeat: int = 30, churn: int = 16) -> LatencyProbe:  # fmt: skip
        """``pending`` pods (the pod list's first, cycled; the next ones arrive) on ``nodes`` loaded
        to ``load`` of their GPUs."""
        if not pods or pending < 1 or repeat < 1 or churn < 0:
            raise ValueError("the latency probe needs pods, pending >= 1, repeat >= 1 and churn >= 0")
        return cls(loaded_snapshot(nodes, pods, load, seed), tuple(pods), pending, repeat, churn)

    def describe(self) -> dict[str, Any]:
        snap = self.snapshot
        used = 1 - float(snap.gpu_free_milli.sum()) / max(1.0, float(snap.gpu_cap_milli.sum()))
        return {"pending": self.pending, "nodes": snap.num_nodes, "gpu_used_pct": round(100 * used, 1),
                "repeat": self.repeat, "churn": self.churn, "method": "consecutive steps, pair cache"}  # fmt: skip


def measure_step_latency(policy: Any, probe: LatencyProbe) -> dict[str, Any]:
    """p50 / p99 (ms) of ``policy``'s model step on ``probe`` (module docstring); JSON-able."""
    import torch

    samples = consecutive_steps(policy, probe.snapshot, probe.pods, pending=probe.pending, steps=probe.repeat,
                                churn=probe.churn)  # fmt: skip
    step = np.array(samples["model step"])
    return probe.describe() | {
        "p50_ms": float(np.percentile(step, 50)), "p99_ms": float(np.percentile(step, 99)),
        "mean_ms": float(step.mean()),
        "inputs_p50_ms": float(np.percentile(samples["inputs"], 50)),
        "model_p50_ms": float(np.percentile(samples["model"], 50)),
        "torch_threads": torch.get_num_threads(),
    }  # fmt: skip
