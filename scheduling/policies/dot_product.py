"""``dot-product``: Tetris-style alignment of the pod's demand with the node's free resources.

The published baseline (the simulator's ``DotProductScore`` with merged GPU dimension and
max-spec normalisation): the node's free vector ``(cpu, GPU milli summed over its GPUs)``
and the pod's request vector, each divided by the largest node's capacity (128 cores,
8 GPUs); score ``⌊100 × (1 − ⟨free, request⟩ / 2)⌋`` — the smaller the product, the better,
so a pod goes where little of what it needs is left over (packing along its dominant
resources). GPUs inside the node: best fit (:mod:`scheduling.gpu_select`). Ties go to the
node priority (lowest index).
"""

from __future__ import annotations

import numpy as np

from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.policies.sim_conventions import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, request_cpu
from scheduling.snapshot import ClusterSnapshot


@register("dot-product")
class DotProduct(BasePolicy):
    name = "dot-product"

    def __init__(self, quantize: bool = True) -> None:
        self.quantize = quantize

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        cpu = snapshot.cpu_free / MAX_SPEC_CPU * (request_cpu(job) / MAX_SPEC_CPU)
        gpu = snapshot.gpu_free_milli / MAX_SPEC_GPU * (job.gpu_demand_milli / MAX_SPEC_GPU)
        score = MAX_NODE_SCORE * (1.0 - (cpu + gpu) / 2.0)
        return np.floor(score) if self.quantize else score
