"""Builders for the scheduling tests: tiny clusters whose right answers are known."""

from __future__ import annotations

from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot, NodeView


def node(node_id: str, *, gpus: int = 0, model: str | None = None, cpu: int = 32_000, mem: int = 65_536,
         gpu_alloc: tuple[int, ...] = (), **kw) -> NodeView:  # fmt: skip
    if gpus and model is None:
        model = "T4"
    return NodeView(node_id=node_id, cpu_milli=cpu, memory_mib=mem, num_gpu=gpus, gpu_model=model,
                    gpu_alloc_milli=gpu_alloc, **kw)  # fmt: skip


def job(job_id: str = "j", *, cpu: int = 1000, mem: int = 1024, gpus: int = 0, share: int = 0,
        **kw) -> JobRequest:  # fmt: skip
    return JobRequest(job_id=job_id, cpu_milli=cpu, memory_mib=mem, num_gpu=gpus, per_gpu_milli=share, **kw)


def snap(*nodes: NodeView) -> ClusterSnapshot:
    return ClusterSnapshot.from_nodes(nodes)


class Ticking:
    """A clock 0.1 s later at every look, from 0 (a step's hold, ``scheduling.assign._now``)."""

    def __init__(self) -> None:
        self.t = -0.1

    def __call__(self) -> float:
        self.t += 0.1
        return self.t
