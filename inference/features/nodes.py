"""The node state matrix s_t: one float32 row per node (names in :mod:`inference.features.spec`).

Vectorised over nodes. The static columns (capacities, GPU-model one-hot, has-GPU) are
computed once per node table (``snapshot.static_cache``); the dynamic ones from the
snapshot's free arrays on every call.
"""

from __future__ import annotations

import numpy as np

from inference.features.spec import CPU_UNIT, FULL, GPU_UNIT, MEM_UNIT, NODE_BASE, FeatureSpec
from scheduling.snapshot import ClusterSnapshot


def safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a / b`` where ``b > 0``, else 0 (float32)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape, dtype=np.float32), where=b > 0)


def model_one_hot(models: np.ndarray, vocabulary: tuple[str, ...]) -> np.ndarray:
    """``[N, len(vocabulary) + 1]``: the node's GPU model, last column "other" (CPU-only nodes: all 0)."""
    out = np.zeros((len(models), len(vocabulary) + 1), dtype=np.float32)
    index = {m: i for i, m in enumerate(vocabulary)}
    col = np.array([index.get(m, len(vocabulary)) for m in models], dtype=np.int64)
    has = np.array([bool(m) for m in models], dtype=bool)
    out[np.flatnonzero(has), col[has]] = 1.0
    return out


def static_node_features(snapshot: ClusterSnapshot, spec: FeatureSpec) -> np.ndarray:
    """Capacities and GPU model per node (cached per node table and vocabulary; read-only)."""

    def build(s: ClusterSnapshot) -> np.ndarray:
        caps = np.stack([s.cpu_cap / CPU_UNIT, s.mem_cap / MEM_UNIT, s.num_gpu / GPU_UNIT], axis=1)
        out = np.concatenate([caps.astype(np.float32), model_one_hot(s.gpu_model, spec.gpu_models)], axis=1)
        out.setflags(write=False)
        return out

    return snapshot.static_cache(("inference:node-static", spec.gpu_models), build)


def cpu_per_free_gpu(cpu_free: np.ndarray, gpu_free_milli: np.ndarray) -> np.ndarray:
    """Free cpu per free GPU in units of 16 cores, clipped to [0, 4] (4 when no GPU is free)."""
    num = (np.maximum(cpu_free, 0) / 16_000.0).astype(np.float32)
    den = (gpu_free_milli / FULL).astype(np.float32)
    out = np.full(np.broadcast(num, den).shape, 4.0, dtype=np.float32)
    np.divide(num, den, out=out, where=den > 0)  # (num >= 0: only the upper clip can bind)
    return np.minimum(out, 4.0, out=out)


def node_state(snapshot: ClusterSnapshot, spec: FeatureSpec, utilisation: np.ndarray | None = None) -> np.ndarray:
    """float32 ``[N, spec.node_dim]``. ``utilisation``: a per-node hopping-window utilisation
    (0..1) when ``spec.utilisation`` (the worker's windowed table; 0 when not given)."""
    s = snapshot
    static = static_node_features(s, spec)
    num_gpu = s.num_gpu.astype(np.float32)
    partial = np.count_nonzero((s.gpu_free > 0) & (s.gpu_free < FULL), axis=1)
    dyn = np.stack([
        safe_div(s.cpu_free, s.cpu_cap), safe_div(s.mem_free, s.mem_cap), safe_div(s.gpu_free_milli, s.gpu_cap_milli),
        safe_div(s.gpu_full_free, num_gpu), np.maximum(s.gpu_max_free, 0) / FULL, safe_div(partial, num_gpu),
        cpu_per_free_gpu(s.cpu_free, s.gpu_free_milli), s.healthy.astype(np.float32), (num_gpu > 0).astype(np.float32),
    ], axis=1).astype(np.float32)  # fmt: skip
    parts = [static[:, :3], dyn, static[:, 3:]]
    if spec.utilisation:
        util = np.zeros(s.num_nodes, np.float32) if utilisation is None else np.asarray(utilisation, np.float32)
        parts.append(util[:, None])
    from inference.features.cluster import cluster_features, frag_node_features

    if spec.cluster or spec.workload:
        if spec.cluster:
            parts.append(cluster_features(s))
        if spec.workload:
            parts.append(frag_node_features(s, spec))
    out = np.concatenate(parts, axis=1)
    assert out.shape[1] == spec.node_dim and len(NODE_BASE) == 12
    return out
