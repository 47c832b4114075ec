"""GPU fragmentation, defined once (Weng et al., "Beware of Fragmentation", USENIX ATC 2023).

**Target workload** ``M``: pod types ``m`` (cpu, GPUs, milli-GPU per GPU, allowed GPU models)
with popularity ``p_m`` (:class:`Workload`). :meth:`Workload.from_jobs` estimates it the way
the authors' simulator does: count identical requests, keep the most popular types until
they cover ``coverage`` (95 %) of the pods, renormalise.

**Node fragmentation** ``F_n(M)``: the expected milli-GPU of node ``n`` that a pod drawn
from ``M`` could not use. For type ``m``: if ``n`` can host ``m`` (GPU model allowed, enough
cpu, ``num_gpu`` GPUs with at least ``per_gpu_milli`` free each) the free milli on GPUs
with less than ``per_gpu_milli`` free is fragment; otherwise all of the node's free GPU
milli is. CPU-only types can use no GPU, so all free GPU milli counts (as in the paper's
and the simulator's definition: such a type "sees" every idle GPU as fragment)::

    F_n = Σ_m p_m · (free_n − [n hosts m] · usable_n(m)),
    usable_n(m) = Σ_{g: free_g ≥ per_gpu_milli(m)} free_g

Memory is not part of the measure (it is not in the paper's either). **Cluster
fragmentation** is ``Σ_n F_n``; the **fragmentation rate** divides it by the free GPU milli.

**Partial-GPU ratio** (workload-free, for reports): the share of free GPU milli that sits
on partly used GPUs (``0 < free < 1000``) — capacity only a GPU-sharing pod can use.

Computation: types are grouped by GPU request ``k = (per_gpu_milli, num_gpu)``; the weight
of the types of ``k`` a node can host given its GPU model and free cpu is a table lookup
(``weights``), so ``F_n`` is vectorised over nodes and request groups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from scheduling.job import JobRequest
from scheduling.resources import FULL_GPU_MILLI
from scheduling.snapshot import ClusterSnapshot

#: the cpu request kube-scheduler assumes for a container that requests none (non-zero default)
DEFAULT_CPU_MILLI = 100

__all__ = ["FragTables", "PodType", "Workload", "cluster_fragmentation", "fragmentation_rate",
           "node_fragmentation", "partial_gpu_ratio", "request_cpu", "tables_for"]  # fmt: skip


def request_cpu(job: JobRequest) -> int:
    """The cpu request as kube-scheduler scores it (0 counts as 100m)."""
    return job.cpu_milli or DEFAULT_CPU_MILLI


@dataclass(frozen=True, slots=True, order=True)
class PodType:
    """One kind of request in a target workload (GPU fields as in :class:`JobRequest`)."""

    cpu_milli: int
    per_gpu_milli: int
    num_gpu: int
    gpu_models: tuple[str, ...] = ()  # allowed models, sorted; () = any

    @classmethod
    def of(cls, job: JobRequest) -> PodType:
        return cls(request_cpu(job), job.per_gpu_milli, job.num_gpu, tuple(sorted(job.gpu_models)))


@dataclass(frozen=True)
class Workload:
    """Pod types and their popularity (weights sum to 1)."""

    types: tuple[PodType, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.types) != len(self.weights) or not self.types:
            raise ValueError("a workload needs one weight per type and at least one type")
        if min(self.weights) < 0 or sum(self.weights) <= 0:
            raise ValueError("workload weights must be >= 0 and not all 0")

    @classmethod
    def from_counts(cls, counts: dict[PodType, float], coverage: float = 0.95) -> Workload:
        """The most popular types covering ``coverage`` of the count, renormalised. Order:
        count, then the type's fields, both descending (the simulator's order)."""
        if not counts:
            raise ValueError("no pods to estimate a workload from")
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        total = sum(counts.values())
        kept: list[tuple[PodType, float]] = []
        cum = 0.0
        for t, c in ranked:
            if cum >= coverage * total:
                break
            kept.append((t, c))
            cum += c
        return cls(tuple(t for t, _ in kept), tuple(c / cum for _, c in kept))

    @classmethod
    def from_jobs(cls, jobs: Iterable[JobRequest], coverage: float = 0.95, *, cpu_only: bool = True) -> Workload:
        """Estimate from submitted pods (``cpu_only=False`` leaves CPU-only pods out)."""
        counts = Counter(PodType.of(j) for j in jobs if cpu_only or j.num_gpu > 0)
        return cls.from_counts(dict(counts), coverage)


class FragTables:
    """A workload laid out for one cluster's nodes: request groups ``k``, cpu thresholds and
    ``weight[model, cpu bucket, k]`` (weight of the types of ``k`` a node of that GPU model
    with that much free cpu can host)."""

    def __init__(self, workload: Workload, node_models: np.ndarray) -> None:
        w = np.asarray(workload.weights, dtype=np.float64)
        self.total_weight = float(w.sum())
        gpu_types = [(t, p) for t, p in zip(workload.types, w, strict=True) if t.num_gpu > 0]
        keys = sorted({(t.per_gpu_milli, t.num_gpu) for t, _ in gpu_types})
        self.key_milli = np.array([k[0] for k in keys], dtype=np.int64)
        self.key_num = np.array([k[1] for k in keys], dtype=np.int64)
        self.thresholds = np.array(sorted({t.cpu_milli for t, _ in gpu_types}), dtype=np.int64)
        models, self.model_index = np.unique(np.asarray(node_models, dtype=str), return_inverse=True)
        table = np.zeros((len(models), len(self.thresholds) + 1, len(keys)))
        for t, p in gpu_types:
            k = keys.index((t.per_gpu_milli, t.num_gpu))
            u = int(np.searchsorted(self.thresholds, t.cpu_milli)) + 1  # hostable from this bucket up
            allowed = np.array([m != "" and (not t.gpu_models or m in t.gpu_models) for m in models], dtype=bool)
            table[allowed, u:, k] += p
        self.table = table
        self._last: NodeTerms | None = None  # the nodes' terms at the last node_terms call

    @property
    def groups(self) -> int:
        return len(self.key_milli)

    def weights(self, model_index: np.ndarray, cpu_free: np.ndarray) -> np.ndarray:
        """``(…, K)``: hostable weight per request group for nodes of these models and free cpu."""
        bucket = np.searchsorted(self.thresholds, cpu_free, side="right")
        return self.table[model_index, bucket]

    def counts(self, gpu_free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(…, K)`` GPUs that fit each group's per-GPU share, and the free milli on them."""
        fits = gpu_free[..., None, :] >= self.key_milli[:, None]
        return fits.sum(axis=-1), np.where(fits, gpu_free[..., None, :], 0).sum(axis=-1)

    def frag(self, free_total: np.ndarray, weights: np.ndarray, counts: np.ndarray, usable: np.ndarray) -> np.ndarray:
        """``F`` from the parts (shapes broadcast; group axis last)."""
        hosted = weights * (counts >= self.key_num) * usable
        return free_total * self.total_weight - hosted.sum(axis=-1)

    def node_frag(self, gpu_free: np.ndarray, cpu_free: np.ndarray, model_index: np.ndarray) -> np.ndarray:
        """``F`` for node states: ``gpu_free`` ``(…, G)`` (padding < 0), ``cpu_free`` and
        ``model_index`` ``(…)``."""
        free_total = np.where(gpu_free > 0, gpu_free, 0).sum(axis=-1)
        counts, usable = self.counts(gpu_free)
        return self.frag(free_total, self.weights(model_index, cpu_free), counts, usable)

    def node_terms(self, gpu_free: np.ndarray, cpu_free: np.ndarray) -> NodeTerms:
        """The per-node parts of ``F`` for all this table's nodes in the state ``gpu_free [N, G]``,
        ``cpu_free [N]``, recomputing only the nodes whose free GPUs or cpu differ from the
        previous call's: between two placements one node changes, and every part depends on
        its node alone, so the result equals computing them whole (a test holds it). The arrays
        are this table's own and change at the next call: index them, do not keep them."""
        last = self._last
        if last is None or last.gpu_free.shape != gpu_free.shape:
            rows: np.ndarray | slice = slice(None)
            last = self._last = NodeTerms(gpu_free.copy(), cpu_free.copy(), *self._terms(gpu_free, cpu_free, slice(None)))
        else:
            rows = np.flatnonzero((last.gpu_free != gpu_free).any(axis=1) | (last.cpu_free != cpu_free))
            if len(rows):
                last.gpu_free[rows], last.cpu_free[rows] = gpu_free[rows], cpu_free[rows]
                last.total[rows], last.counts[rows], last.usable[rows], last.frag[rows] = self._terms(
                    gpu_free, cpu_free, rows)
        return last

    def _terms(self, gpu_free: np.ndarray, cpu_free: np.ndarray,
               rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        free = gpu_free[rows].astype(np.int64)
        total = np.where(free > 0, free, 0).sum(axis=-1)
        counts, usable = self.counts(free)
        return total, counts, usable, self.frag(total, self.weights(self.model_index[rows], cpu_free[rows]), counts, usable)

    def current_frag(self, gpu_free: np.ndarray, cpu_free: np.ndarray) -> np.ndarray:
        """:meth:`node_frag` of all this table's nodes in this state (from :meth:`node_terms`), a copy."""
        return self.node_terms(gpu_free, cpu_free).frag.copy()


@dataclass
class NodeTerms:
    """Each node's state and the parts of ``F`` it gives (:meth:`FragTables.node_terms`)."""

    gpu_free: np.ndarray  # [N, G], the state these were computed for
    cpu_free: np.ndarray  # [N]
    total: np.ndarray  # [N]: free milli on the node's GPUs
    counts: np.ndarray  # [N, K]: GPUs that fit each request group's share
    usable: np.ndarray  # [N, K]: the free milli on them
    frag: np.ndarray  # [N]: F


def tables_for(snapshot: ClusterSnapshot, workload: Workload) -> FragTables:
    """The :class:`FragTables` of ``workload`` on ``snapshot``'s nodes (cached per node table)."""
    return snapshot.static_cache(("frag-tables", workload), lambda s: FragTables(workload, s.gpu_model))


def node_fragmentation(snapshot: ClusterSnapshot, workload: Workload) -> np.ndarray:
    """``F_n(M)`` per node, in milli-GPU."""
    return tables_for(snapshot, workload).current_frag(snapshot.gpu_free, snapshot.cpu_free)


def cluster_fragmentation(snapshot: ClusterSnapshot, workload: Workload) -> float:
    """``Σ_n F_n(M)`` in milli-GPU."""
    return float(node_fragmentation(snapshot, workload).sum())


def fragmentation_rate(snapshot: ClusterSnapshot, workload: Workload) -> float:
    """Cluster fragmentation over free GPU milli (0 when nothing is free)."""
    free = int(snapshot.gpu_free_milli.sum())
    return cluster_fragmentation(snapshot, workload) / free if free else 0.0


def partial_gpu_ratio(snapshot: ClusterSnapshot) -> float:
    """Share of free GPU milli on partly used GPUs (0 when nothing is free)."""
    g = snapshot.gpu_free
    free = int(np.where(g > 0, g, 0).sum())
    partial = int(np.where((g > 0) & (g < FULL_GPU_MILLI), g, 0).sum())
    return partial / free if free else 0.0

