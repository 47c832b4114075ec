"""Conventions of the FGD authors' simulator (hkust-adsl/kubernetes-scheduler-simulator) that
the published baselines are defined with, shared by their policy modules.

kube-scheduler scores are integers 0..100; ``MAX_SPEC_*`` normalise free and requested
amounts by the largest node of the openb cluster (128 cores, 8 GPUs) rather than by each
node's own capacity; a pod's "GPU affinity" is the kind of GPU request it makes.
"""

from __future__ import annotations

from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import request_cpu
from scheduling.resources import FULL_GPU_MILLI

MAX_SPEC_CPU = 128_000  # milli-cpu
MAX_SPEC_GPU = 8_000  # milli-GPU
MAX_NODE_SCORE = 100

__all__ = ["MAX_NODE_SCORE", "MAX_SPEC_CPU", "MAX_SPEC_GPU", "gpu_affinity", "is_sharing", "request_cpu"]


def is_sharing(job: JobRequest) -> bool:
    """A GPU-sharing pod: one GPU, less than all of it."""
    return job.num_gpu == 1 and job.per_gpu_milli < FULL_GPU_MILLI


def gpu_affinity(job: JobRequest) -> str | None:
    """``"share-gpu"``, ``"<k>-gpu"`` for ``k`` whole GPUs, ``None`` without GPUs."""
    if job.num_gpu == 0:
        return None
    return "share-gpu" if is_sharing(job) else f"{job.num_gpu}-gpu"
