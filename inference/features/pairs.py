"""Pair features of one job against every node, on the snapshot's CURRENT free capacity.

The policy head scores (job, node) from the job embedding, the node embedding (computed
once per step) and these features, so a score stays valid while ``place_one`` reserves
jobs one after another within a step: every call recomputes them from the free arrays
(vectorised: ``[N]`` and ``[N, max_gpus]`` numpy ops, no loop over nodes).

The GPUs the job would take follow :func:`scheduling.gpu_select.select_gpus` (what the
learned policy uses): a sharing pod the fitting GPU with the least free share, ``k`` whole
GPUs ``k`` fully free ones. Nodes where the job does not fit get clipped, meaningless
values — they are masked by the filters anyway.
"""

from __future__ import annotations

import numpy as np

from inference.features.nodes import cpu_per_free_gpu
from inference.features.spec import FULL, PAIR, FeatureSpec
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


def _inverses(s: ClusterSnapshot) -> np.ndarray:
    """float64 ``[4, N]``: 1 / cpu cap, memory cap, GPU milli cap, GPU count (0 where none)."""
    caps = np.stack([s.cpu_cap, s.mem_cap, s.gpu_cap_milli, s.num_gpu]).astype(np.float64)
    out = np.divide(1.0, caps, out=np.zeros_like(caps), where=caps > 0)
    out.setflags(write=False)
    return out


def pair_features(job: JobRequest, snapshot: ClusterSnapshot, spec: FeatureSpec) -> np.ndarray:
    """float32 ``[N, spec.pair_dim]`` (names: ``spec.pair_names``; :data:`PAIR` first)."""
    base = _base_pairs(job, snapshot)
    if not (spec.cluster or spec.workload):
        return base
    from inference.features.cluster import frag_pair_features, priority

    parts = [base] + ([priority(snapshot)] if spec.cluster else [])
    if spec.workload:
        parts.append(frag_pair_features(job, snapshot, spec))
    return np.concatenate(parts, axis=1)


def _base_pairs(job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
    s = snapshot
    n = s.num_nodes
    inv_cpu, inv_mem, inv_gpu, inv_num = s.static_cache("inference:pair-inverses", _inverses)
    free = np.ascontiguousarray(s.gpu_free.T)  # [G, N], padding -1: reductions over G are fast this way
    out = np.empty((len(PAIR), n), dtype=np.float64)
    d = job.per_gpu_milli
    out[5] = 0.0
    out[6] = 0.0
    partial = (free > 0) & (free < FULL)
    partial_count = np.count_nonzero(partial, axis=0)
    max_free = s.gpu_max_free
    if job.num_gpu == 1 and d < FULL:  # sharing: the best-fit GPU (least free among those that fit)
        chosen = np.where(free >= d, free, 1 << 30).min(axis=0)
        ok = chosen < (1 << 30)
        left = chosen - d
        out[5] = np.where(ok, left / FULL, 1.0)
        was_partial = ok & (chosen < FULL)
        out[6] = was_partial
        full_after = s.gpu_full_free - (ok & ~was_partial)
        partial_after = partial_count + (ok & ~was_partial & (left > 0)) - (was_partial & (left == 0))
        unique_max = ok & (chosen == max_free) & (np.count_nonzero(free == max_free, axis=0) == 1)
        second = np.where(free < max_free, free, -1).max(axis=0)
        max_after = np.where(unique_max, np.maximum(second, left), max_free)
    else:
        partial_after = partial_count
        if job.num_gpu == 0:
            full_after, max_after = s.gpu_full_free, max_free
        else:  # whole GPUs: k fully free ones
            full_after = s.gpu_full_free - job.num_gpu
            max_after = np.where(full_after > 0, FULL, np.where(partial, free, 0).max(axis=0))
    cpu_left = s.cpu_free - job.cpu_milli
    gpu_left = s.gpu_free_milli - job.num_gpu * d
    out[0] = cpu_left * inv_cpu
    out[1] = (s.mem_free - job.memory_mib) * inv_mem
    out[2] = gpu_left * inv_gpu
    out[3] = full_after * inv_num
    out[4] = np.maximum(max_after, 0) / FULL
    out[7] = partial_after * inv_num
    out[8] = cpu_per_free_gpu(cpu_left, gpu_left)
    out[9] = (s.gpu_free_milli == s.gpu_cap_milli) & (s.cpu_free == s.cpu_cap)
    out[10] = 1.0 - s.cpu_free * inv_cpu
    out[11] = 1.0 - s.gpu_free_milli * inv_gpu
    np.clip(out[:4], -1.0, 1.0, out=out[:4])
    return out.T.astype(np.float32)
