"""Consecutive scheduling steps with placements and departures between them: the model step
as the worker sees it, with the pair features kept from step to step.

``semsched bench learned`` times one step again and again on the same state; there a pair
cache would recompute nothing and look free. Here each step is followed by what happens in
a cluster between two steps: ``churn`` of the pending pods are placed (best-fit, the first
that fit), as many new pods arrive from the pod list, and ``churn`` earlier placements end,
so the load stays where it started. The next step then asks for the pending pods' shapes
on a state where up to ``2 × churn`` nodes moved and up to ``churn`` shapes may be new.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def churned_model_steps(policy: Any, snap: Any, pods: Sequence[Any], *, pending: int, steps: int, churn: int,
                        seed: int = 0) -> dict[str, list[float]]:  # fmt: skip
    """ms per part (``inputs``, ``model``, ``model step``) of ``steps`` consecutive steps with the
    policy's pair cache (one untimed first step fills it), plus ``changed nodes`` and
    ``new shapes`` per step. ``snap`` is copied, not changed."""
    from inference.features.pair_cache import PairCache
    from inference.training.step_latency import model_step
    from scheduling.assign import Placement, place_one
    from scheduling.policies import get_policy

    rng = np.random.default_rng(seed)
    snap = snap.copy()
    queue = [pods[i % len(pods)] for i in range(pending)]
    arrivals = pending
    placed: list[tuple[int, Any, tuple[int, ...]]] = []
    best_fit = get_policy("best-fit")
    cache = PairCache()
    samples: dict[str, list[float]] = {}
    last = (snap.cpu_free.copy(), snap.gpu_free.copy())
    for step in range(steps + 1):
        moved = (snap.cpu_free != last[0]) | (snap.gpu_free != last[1]).any(axis=1)  # since the last step
        last, shapes_before = (snap.cpu_free.copy(), snap.gpu_free.copy()), cache.stats.shapes_new
        parts = model_step(policy, snap, queue, pair_cache=cache)
        if step:
            parts["changed nodes"] = float(np.count_nonzero(moved))
            parts["new shapes"] = float(cache.stats.shapes_new - shapes_before)
            for name, value in parts.items():
                samples.setdefault(name, []).append(value)
        for _ in range(min(churn, len(placed))):  # departures
            i, job, gpus = placed.pop(int(rng.integers(len(placed))))
            snap.free(i, job, gpus)
        taken = 0
        for k, job in enumerate(list(queue)):
            if taken == churn:
                break
            result = place_one(snap, job, best_fit, top_k=0)
            if isinstance(result, Placement):
                placed.append((result.node_index, job, result.gpu_indices))
                queue[k] = pods[arrivals % len(pods)]
                arrivals += 1
                taken += 1
    return samples
