"""The made-up step a worker runs before its first real one (:meth:`inference.policy.LearnedPolicy.warm_up`).

Why: the first model call of a process pays for torch's lazy start, the text encoder's
loading (seconds for MiniLM) and, on Triton, the connection; in the demo those landed on the
first jobs' decision latency. Two nodes and two pods — one sharing a GPU, one taking a whole
one — so the step's model call and the in-step re-scoring both run.
"""

from __future__ import annotations

from collections.abc import Sequence

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
