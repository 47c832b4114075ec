"""Hand-made clusters and jobs for the inference tests."""

from __future__ import annotations

from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot


def small_nodes(n: int = 12) -> list[NodeView]:
    """``n`` nodes cycling through four shapes (8×A10, 4×T4, 2×V100, CPU-only)."""
    shapes = [(64_000, 262_144, 8, "A10"), (32_000, 131_072, 4, "T4"), (16_000, 65_536, 2, "V100M32"),
              (96_000, 393_216, 0, None)]  # fmt: skip
    out = []
    for i in range(n):
        cpu, mem, gpus, model = shapes[i % len(shapes)]
        out.append(NodeView(node_id=f"n{i}", cpu_milli=cpu, memory_mib=mem, num_gpu=gpus, gpu_model=model))
    return out


def job(job_id: str = "j", cpu: int = 4000, mem: int = 8192, gpus: int = 1, per: int = 1000, **kw) -> JobRequest:
    return JobRequest(job_id=job_id, cpu_milli=cpu, memory_mib=mem, num_gpu=gpus, per_gpu_milli=per, **kw)


def small_snapshot(n: int = 12) -> ClusterSnapshot:
    return ClusterSnapshot.from_nodes(small_nodes(n))


def pod_mix(n: int, seed: int = 0) -> list[JobRequest]:
    """A deterministic mix of sharing, whole-GPU and CPU-only pods, with texts."""
    import numpy as np

    rng = np.random.default_rng(seed)
    shapes = [(2000, 4096, 1, 250), (4000, 8192, 1, 500), (8000, 16384, 1, 1000), (16000, 32768, 2, 1000),
              (6000, 12288, 1, 460), (4000, 8192, 0, 0), (12000, 24576, 4, 1000)]  # fmt: skip
    out = []
    for i in range(n):
        cpu, mem, g, per = shapes[int(rng.integers(len(shapes)))]
        out.append(job(f"p{i:04d}", cpu, mem, g, per, text=f"pod-{i % 7} | train resnet | trace=test",
                       submit_time=float(i)))  # fmt: skip
    return out
