"""The made-up step a worker runs before its first real one (:meth:`inference.policy.LearnedPolicy.warm_up`).

Why: the first model call of a process pays for torch's lazy start, the text encoder's
loading (seconds for MiniLM) and, on Triton, the connection; in the demo those landed on the
first jobs' decision latency. Two nodes and two pods — one sharing a GPU, one taking a whole
one — so the step's model call and the in-step re-scoring both run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot


def warm_up_step(gpu_models: Sequence[str] = ()) -> tuple[ClusterSnapshot, list[JobRequest]]:
    """A two-node cluster (of the first GPU model the features know) and two pods to place (on it, or on a real one)."""
    model = gpu_models[0] if gpu_models else "GPU"
    nodes = [NodeView(f"warm-up-{i}", cpu_milli=32_000, memory_mib=131_072, num_gpu=2, gpu_model=model)
             for i in range(2)]  # fmt: skip
    jobs = [JobRequest(f"warm-up-{kind}", cpu_milli=1000, memory_mib=1024, num_gpu=1, per_gpu_milli=milli,
                       text=f"warm-up {kind}") for kind, milli in (("share", 500), ("whole", 1000))]  # fmt: skip
    return ClusterSnapshot.from_nodes(nodes), jobs


async def warm_up_policy(policy: Any, snapshot: ClusterSnapshot | None = None) -> float:
    """Run :func:`warm_up_step`'s pods through ``policy``'s (a loaded
    :class:`~inference.policy.LearnedPolicy`) own path — ``prepare_step``, then ``schedule_step``
    on the calling thread, as the worker's loop runs them; the pods in ``snapshot``'s cluster, and the
    model called on them even where they fit nowhere — and put its step state back
    (``STEP_STATE``): on the made-up cluster at start, on ``snapshot`` (a cluster's real nodes)
    while the worker idles, so that cluster's first step finds its per-table state built
    (topology, node features, FGD's tables; its pair cache is kept). Seconds."""
    from inference.policy import STEP_STATE
    from scheduling.assign import schedule_step

    t0 = time.perf_counter()
    made_up, jobs = warm_up_step(policy.spec.gpu_models)
    snap = made_up if snapshot is None else snapshot
    if snap.num_nodes:  # the pods of the cluster warmed up on (else the cluster filter turns them away)
        jobs = [dataclasses.replace(j, cluster=str(snap.cluster[0])) for j in jobs]
    kept = {k: getattr(policy, k) for k in STEP_STATE}
    try:
        await policy.prepare_step(snap, jobs, 0.0, window=0)  # called even when the cluster is full
        schedule_step(snap, jobs, policy, now=0.0, top_k=0)
    finally:
        policy.caches.forget(made_up)
        for k, v in kept.items():
            setattr(policy, k, v)
    return time.perf_counter() - t0
