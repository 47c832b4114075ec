"""Cluster-level and fragmentation features (the optional ``CLUSTER`` / ``FRAG_*`` columns of
:mod:`inference.features.spec`), vectorised over nodes.

Why: imitating FGD showed two things a per-node view lacks. (1) FGD's scores are integers and
tie often; the scheduler then takes the LOWEST INDEX, and that consistent preference is what
packs pods onto the same nodes (FGD with random tie-breaks allocates 90 % instead of 95 % on
fill seed 0). A model can only reproduce it if it sees the node's index (``priority``).
(2) FGD judges a placement by the fragmentation it adds under the target workload; the model
gets that number (``frag_delta``, FGD's quantised score and whether it is FGD's best) and the
cluster's context (how many whole free nodes of each GPU model are left), so it can learn to
follow FGD and, from other teachers, to deviate from it.

The target workload comes from the spec (saved with the model): the one the model was
trained with, as the fill benchmark gives FGD its workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from inference.features.fits import shape_fits
from inference.features.nodes import safe_div
from inference.features.spec import FeatureSpec, WorkloadRow
from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import PodType, Workload, node_fragmentation
from scheduling.policies.fgd import FGD
from scheduling.snapshot import ClusterSnapshot

PREFILTER_FROM = 64  # nodes: below, the resource check costs more than FGD on the nodes it would skip


@lru_cache(maxsize=8)
def workload_of(rows: tuple[WorkloadRow, ...]) -> Workload:
    return Workload(tuple(PodType(c, p, n, tuple(m)) for c, p, n, m, _ in rows), tuple(w for *_, w in rows))


@lru_cache(maxsize=8)
def _fgd(rows: tuple[WorkloadRow, ...]) -> FGD:
    """A continuous-score FGD on the spec's workload (stateless apart from its per-table cache)."""
    return FGD(workload_of(rows), quantize=False)


def model_groups(s: ClusterSnapshot) -> np.ndarray:
    """Each node's GPU-model group ``[N]`` (int64, read-only): the groups the ``model_*`` columns are
    shared over (by the model's name, not the spec's one-hot, where unknown models share "other")."""

    def build(snap: ClusterSnapshot) -> np.ndarray:
        _, idx = np.unique(np.asarray(snap.gpu_model, dtype=str), return_inverse=True)
        out = idx.astype(np.int64)
        out.setflags(write=False)
        return out

    return s.static_cache("inference:model-index", build)


def cluster_features(snapshot: ClusterSnapshot) -> np.ndarray:
    """float32 ``[N, len(CLUSTER)]``."""
    s = snapshot
    n = s.num_nodes
    model = model_groups(s)
    groups = int(model.max()) + 1 if n else 0
    empty = (s.gpu_free_milli == s.gpu_cap_milli) & (s.cpu_free == s.cpu_cap)
    per_model = np.bincount(model, minlength=groups).astype(np.float64)
    empty_share = safe_div(np.bincount(model, weights=empty, minlength=groups), per_model)
    cap = np.bincount(model, weights=s.gpu_cap_milli, minlength=groups)
    free_share = safe_div(np.bincount(model, weights=s.gpu_free_milli, minlength=groups), cap)
    total_cap = float(s.gpu_cap_milli.sum())
    used = 1.0 - float(s.gpu_free_milli.sum()) / total_cap if total_cap else 0.0
    big = s.num_gpu == s.num_gpu.max() if n else np.zeros(0, bool)
    big_empty = float(empty[big].mean()) if big.any() and s.num_gpu.max() > 0 else 0.0
    priority = np.arange(n, dtype=np.float32) / max(n - 1, 1)
    return np.stack([priority, empty_share[model], free_share[model], np.full(n, used, np.float32),
                     np.full(n, big_empty, np.float32)], axis=1).astype(np.float32)  # fmt: skip


def frag_node_features(snapshot: ClusterSnapshot, spec: FeatureSpec) -> np.ndarray:
    """float32 ``[N, len(FRAG_NODE)]``: F_n / GPU capacity, and the cluster's fragmentation rate."""
    s = snapshot
    frag = node_fragmentation(s, workload_of(spec.workload))
    free = float(s.gpu_free_milli.sum())
    rate = float(frag.sum()) / free if free else 0.0
    return np.stack([safe_div(frag, s.gpu_cap_milli), np.full(s.num_nodes, rate, np.float32)], axis=1)


def frag_pair_features(job: JobRequest, snapshot: ClusterSnapshot, spec: FeatureSpec) -> np.ndarray:
    """float32 ``[N, len(FRAG_PAIR)]``: the fragmentation change of placing ``job`` on each node
    (FGD's computation: a sharing pod on its best GPU), FGD's quantised score, its tie set and
    its pick (the tie set's first node).
    Nodes where the job does not fit (GPUs, cpu, memory, GPU model, health) get ``(0, 0, 0)``."""
    return frag_columns(*frag_parts(job, snapshot, spec))


def frag_parts(job: JobRequest, snapshot: ClusterSnapshot, spec: FeatureSpec,
               nodes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(score, fits)`` on ``nodes`` (indices; default all): FGD's continuous score
    (sigmoid(decrease / 1000) × 100) and whether the job fits: FGD scores it and it fits by
    resources (:func:`inference.features.fits.shape_fits`). Each node's values depend on that
    node alone, so a caller can keep them and recompute only the nodes that changed
    (:class:`inference.features.pair_cache.PairCache`); :func:`frag_columns` makes the columns."""
    s = snapshot
    if nodes is None:
        sel: slice | np.ndarray = slice(None)
        mask = np.ones(s.num_nodes, dtype=bool)
    else:
        sel = np.asarray(nodes, dtype=np.int64)
        mask = np.zeros(s.num_nodes, dtype=bool)
        mask[sel] = True
    cont = _fgd(spec.workload).score(job, s, mask)[sel]
    return cont, np.isfinite(cont) & shape_fits([job], s, spec, None if nodes is None else sel)[0]


def frag_parts_many(jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, spec: FeatureSpec,
                    nodes: np.ndarray, room: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`frag_parts` of several jobs on the same ``nodes``, ``([J, M], [J, M])``: FGD's node
    terms once for all of them (:meth:`scheduling.policies.fgd.FGD.score_many`). On many nodes,
    FGD runs only on those where some of the jobs fits by resources
    (:func:`inference.features.fits.shape_fits`, which holds every node FGD's ``fits`` does); the
    score is ``-inf`` on the others, as FGD's own is where a job does not fit, and ``fits``
    False — the same columns. ``room``: ``shape_fits(jobs, snapshot, spec, nodes)`` when the
    caller has it already (the pair cache keeps it)."""
    s = snapshot
    sel = np.asarray(nodes, dtype=np.int64)
    room = shape_fits(jobs, s, spec, sel) if room is None else room
    if len(sel) > PREFILTER_FROM:  # FGD's terms only on nodes where some of the jobs fits by resources
        some = room.any(axis=0)
        cont = np.full((len(jobs), len(sel)), -np.inf)
        cont[:, some] = _fgd(spec.workload).score_many(jobs, s, sel[some])
    else:
        cont = _fgd(spec.workload).score_many(jobs, s, sel)
    return cont, np.isfinite(cont) & room


def frag_columns(cont: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """float32 ``[..., N, len(FRAG_PAIR)]`` from every node's :func:`frag_parts` (``[..., N]``: one row
    per job, or several at once): :func:`frag_node_columns`, then :func:`frag_tie_columns`."""
    local = frag_node_columns(cont, fits)
    return np.concatenate([local, frag_tie_columns(local[..., 1], fits)], axis=-1)


def frag_node_columns(cont: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """float32 ``[..., 2]``: the fragmentation change (−decrease / 8000, clipped to ±1) and FGD's
    quantised score / 100, 0 where the job does not fit. Each node's depend on that node alone."""
    p = np.clip(np.where(fits, cont, 50.0) / 100.0, 1e-12, 1.0 - 1e-12)
    decrease = 1000.0 * np.log(p / (1.0 - p))  # F_before - F_after, milli-GPU
    quant = np.floor(np.where(fits, cont, 0.0))
    return np.stack([np.where(fits, np.clip(-decrease / 8000.0, -1.0, 1.0), 0.0), quant / 100.0],
                    axis=-1).astype(np.float32)  # fmt: skip


def frag_tie_columns(quant: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """float32 ``[..., N, 2]``: :func:`frag_tie_sets` as columns."""
    return np.stack(frag_tie_sets(quant, fits), axis=-1).astype(np.float32)


def frag_tie_sets(quant: np.ndarray, fits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """bool ``([..., N], [..., N])`` from the quantised scores ``[..., N]`` (:func:`frag_node_columns`'s
    second column): FGD's tie set (the nodes with the best score the job fits) and its pick (the tie
    set's first node). These depend on every node. A cluster of no nodes has neither (found by review: a
    ValueError from the empty reduction)."""
    if quant.shape[-1] == 0:
        return np.zeros(quant.shape, bool), np.zeros(quant.shape, bool)
    best = np.where(fits, quant, -np.inf).max(axis=-1, keepdims=True)  # -inf: fits nowhere
    tie = fits & (quant == best)
    first = np.zeros_like(tie)
    np.put_along_axis(first, np.argmax(tie, axis=-1)[..., None], tie.any(axis=-1, keepdims=True), axis=-1)
    return tie, first


def priority(snapshot: ClusterSnapshot) -> np.ndarray:
    """float32 ``[N, 1]``: index / (N - 1)."""
    n = snapshot.num_nodes
    return (np.arange(n, dtype=np.float32) / max(n - 1, 1))[:, None]
