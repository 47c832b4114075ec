"""Pair features of one job against every node, on the snapshot's CURRENT free capacity.

The policy head scores (job, node) from the job embedding, the node embedding (computed
once per step) and these features, so a score stays valid while ``place_one`` reserves
jobs one after another within a step: every call recomputes them from the free arrays
(vectorised over the nodes and over the jobs: ``[J, N]`` and ``[J, max_gpus, N]`` numpy ops).

The GPUs the job would take follow :func:`scheduling.gpu_select.select_gpus` (what the
learned policy uses): a sharing pod the fitting GPU with the least free share, ``k`` whole
GPUs ``k`` fully free ones. Nodes where the job does not fit get clipped, meaningless
values — they are masked by the filters anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

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


Shape = tuple[int, int, int, int, frozenset[str]]


def pair_shape(job: JobRequest, spec: FeatureSpec) -> Shape:
    """What a job's pair features depend on: its resources and, for FGD's columns (whether it
    fits on a node), the GPU models it accepts. Jobs of one shape share their pair rows."""
    return (job.cpu_milli, job.memory_mib, job.num_gpu, job.per_gpu_milli,
            job.gpu_models if spec.workload else frozenset())  # fmt: skip


def pair_features(job: JobRequest, snapshot: ClusterSnapshot, spec: FeatureSpec,
                  nodes: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """float32 ``[N, spec.pair_dim]`` (names: ``spec.pair_names``; :data:`PAIR` first); with
    ``nodes`` (indices) only those rows, ``[len(nodes), pair_dim]`` — what in-step re-scoring needs."""
    return pair_features_many([job], snapshot, spec, nodes)[0]


def pair_features_many(jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, spec: FeatureSpec,
                       nodes: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """float32 ``[len(jobs), N, spec.pair_dim]``: :func:`pair_features` of each job, vectorised
    over the jobs too (a step computes them once per distinct job shape)."""
    sel = slice(None) if nodes is None else np.asarray(nodes, dtype=np.int64)
    m = snapshot.num_nodes if nodes is None else len(sel)  # type: ignore[arg-type]
    # feature-major while computing (contiguous [J, M] writes), one transposing copy at the end
    out = np.empty((spec.pair_dim, len(jobs), m), dtype=np.float32)
    local_pairs(jobs, snapshot, spec, sel, out)
    if spec.workload:  # depends on every node (FGD's tie set): computed whole, then the rows
        from inference.features.cluster import frag_pair_features

        for i, job in enumerate(jobs):
            out[local_pair_dim(spec):, i] = frag_pair_features(job, snapshot, spec)[sel].T
    return np.ascontiguousarray(out.transpose(1, 2, 0))


def local_pair_dim(spec: FeatureSpec) -> int:
    """How many leading pair columns depend on the node alone (all but FGD's ``FRAG_PAIR``)."""
    return len(PAIR) + (1 if spec.cluster else 0)


def local_pairs(jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, spec: FeatureSpec,
                sel: slice | np.ndarray, out: np.ndarray) -> None:  # fmt: skip
    """Write the first :func:`local_pair_dim` rows of ``out [≥local_pair_dim, J, M]`` on the nodes
    ``sel`` picks: the columns whose value on a node depends on that node alone."""
    _base_pairs(jobs, snapshot, sel, out)
    if spec.cluster:
        from inference.features.cluster import priority

        out[len(PAIR)] = priority(snapshot)[sel, 0]


def _base_pairs(jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, sel: slice | np.ndarray,
                out: np.ndarray) -> None:  # fmt: skip
    """Write the :data:`PAIR` rows of ``out [pair_dim, J, M]`` on the nodes ``sel`` picks, feature
    by feature as ``[J, M]`` (jobs broadcast against nodes)."""
    s = snapshot
    inv_cpu, inv_mem, inv_gpu, inv_num = s.static_cache("inference:pair-inverses", _inverses)[:, sel]
    cpu_free, mem_free, cpu_cap = s.cpu_free[sel], s.mem_free[sel], s.cpu_cap[sel]
    gpu_free_milli, gpu_cap_milli = s.gpu_free_milli[sel], s.gpu_cap_milli[sel]
    full_free, max_free = s.gpu_full_free[sel], s.gpu_max_free[sel]
    demand = np.array([[j.cpu_milli, j.memory_mib, j.num_gpu, j.per_gpu_milli] for j in jobs],
                      dtype=np.int64).reshape(len(jobs), 4)  # fmt: skip
    cpu, mem = demand[:, 0, None], demand[:, 1, None]  # [J, 1]
    # every GPU column depends on (num_gpu, per-GPU share) alone: computed once per distinct pair
    index: dict[tuple[int, int], int] = {}  # (a dict: np.unique(axis=0) costs more than a small step's features)
    back = np.array([index.setdefault((j.num_gpu, j.per_gpu_milli), len(index)) for j in jobs], dtype=np.int64)
    combos = np.array(list(index), dtype=np.int64).reshape(len(index), 2)
    ngpu, d = combos[:, 0, None], combos[:, 1, None]  # [U, 1]
    free = np.ascontiguousarray(s.gpu_free[sel].T)  # [G, M], padding -1: reductions over G are fast this way
    gpu = np.zeros((6, len(combos), len(cpu_free)), dtype=np.float32)  # PAIR columns 2..7, [U, M] each
    partial = (free > 0) & (free < FULL)
    partial_count = np.count_nonzero(partial, axis=0)
    # whole GPUs (k fully free ones) and CPU-only pods; sharing pods are overwritten below
    full_after = np.where(ngpu == 0, full_free, full_free - ngpu)
    max_after = np.where(ngpu == 0, max_free, np.where(full_after > 0, FULL, np.where(partial, free, 0).max(axis=0)))
    partial_after = np.broadcast_to(partial_count, full_after.shape).copy()
    sharing = ((ngpu == 1) & (d < FULL))[:, 0]
    if sharing.any():  # the best-fit GPU (least free among those that fit)
        ds = d[sharing][:, :, None]  # [K, 1, 1]
        chosen = np.where(free >= ds, free, 1 << 30).min(axis=1)  # [K, M]
        ok = chosen < (1 << 30)
        left = chosen - ds[:, :, 0]
        was_partial = ok & (chosen < FULL)
        unique_max = ok & (chosen == max_free) & (np.count_nonzero(free == max_free, axis=0) == 1)
        second = np.where(free < max_free, free, -1).max(axis=0)
        gpu[3, sharing] = np.where(ok, left / FULL, 1.0)
        gpu[4, sharing] = was_partial
        full_after[sharing] = full_free - (ok & ~was_partial)
        partial_after[sharing] = partial_count + (ok & ~was_partial & (left > 0)) - (was_partial & (left == 0))
        max_after[sharing] = np.where(unique_max, np.maximum(second, left), max_free)
    gpu_left = gpu_free_milli - ngpu * d
    gpu[0] = gpu_left * inv_gpu
    gpu[1] = full_after * inv_num
    gpu[2] = np.maximum(max_after, 0) / FULL
    gpu[5] = partial_after * inv_num
    np.clip(gpu[:2], -1.0, 1.0, out=gpu[:2])
    out[2:8] = gpu[:, back]
    cpu_left = cpu_free - cpu
    out[0] = cpu_left * inv_cpu
    out[1] = (mem_free - mem) * inv_mem
    np.clip(out[:2], -1.0, 1.0, out=out[:2])
    out[8] = cpu_per_free_gpu(cpu_left, gpu_left[back])
    out[9] = (gpu_free_milli == gpu_cap_milli) & (cpu_free == cpu_cap)
    out[10] = 1.0 - cpu_free * inv_cpu
    out[11] = 1.0 - gpu_free_milli * inv_gpu
