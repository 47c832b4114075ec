"""``ClusterSnapshot``: the cluster as numpy arrays over nodes, cheap to copy and update.

Static per-node facts (ids, cluster, GPU model, capacities, topology) are shared between
copies; the mutable state (free cpu/memory, the per-GPU free matrix, health, per-app
instance counts) is copied. ``gpu_free`` is ``nodes × max_gpus`` milli-GPU with padding
columns (GPUs a node does not have) set to ``-1`` so no request ever fits them.

The worker rebuilds a snapshot every step from inventory plus its reservations
(:meth:`reserve`); the simulator reserves and :meth:`free` s as jobs start and finish.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from scheduling.node import NodeView
from scheduling.resources import FULL_GPU_MILLI

__all__ = ["CapacityError", "ClusterSnapshot", "Holder", "NodeView"]

PAD = -1  # gpu_free value of a GPU slot the node does not have


class CapacityError(ValueError):
    """A reservation that does not fit (or a free that exceeds what is held)."""


class Holder(Protocol):
    """What :meth:`ClusterSnapshot.reserve` needs of a job (``JobRequest`` fits)."""

    job_id: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    per_gpu_milli: int
    app: str | None


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(eq=False)
class _Static:
    node_ids: np.ndarray
    index: dict[str, int]
    cluster: np.ndarray
    gpu_model: np.ndarray
    num_gpu: np.ndarray
    cpu_cap: np.ndarray
    mem_cap: np.ndarray
    gpu_cap_milli: np.ndarray
    topology: tuple[dict[str, str], ...]
    all_true: np.ndarray
    zeros: np.ndarray
    model_masks: dict[frozenset[str], np.ndarray] = field(default_factory=dict)
    cluster_masks: dict[str, np.ndarray] = field(default_factory=dict)
    empty: ClusterSnapshot | None = None


class ClusterSnapshot:
    """Numpy arrays over the nodes of a cluster (see the module docstring)."""

    __slots__ = ("_s", "cpu_free", "mem_free", "gpu_free", "gpu_free_milli", "healthy", "_apps")

    def __init__(self, static: _Static, cpu_free: np.ndarray, mem_free: np.ndarray, gpu_free: np.ndarray,
                 healthy: np.ndarray, apps: dict[str, np.ndarray]) -> None:  # fmt: skip
        self._s = static
        self.cpu_free = cpu_free
        self.mem_free = mem_free
        self.gpu_free = gpu_free
        self.gpu_free_milli = np.where(gpu_free > 0, gpu_free, 0).sum(axis=1, dtype=np.int64)
        self.healthy = healthy
        self._apps = apps

    # -- construction ---------------------------------------------------------------
    @classmethod
    def from_nodes(cls, nodes: Iterable[NodeView]) -> ClusterSnapshot:
        """A snapshot of ``nodes`` (in this order), with their allocations subtracted."""
        nodes = list(nodes)
        n = len(nodes)
        index: dict[str, int] = {}
        for i, node in enumerate(nodes):
            if node.node_id in index:
                raise ValueError(f"duplicate node id {node.node_id!r}")
            index[node.node_id] = i
        num_gpu = np.array([nd.num_gpu for nd in nodes], dtype=np.int32)
        width = max(1, int(num_gpu.max(initial=0)))
        gpu_free = np.full((n, width), PAD, dtype=np.int32)
        for i, nd in enumerate(nodes):
            gpu_free[i, : nd.num_gpu] = FULL_GPU_MILLI
            if nd.gpu_alloc_milli:
                gpu_free[i, : nd.num_gpu] -= np.asarray(nd.gpu_alloc_milli, dtype=np.int32)
        cpu_cap = np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)
        mem_cap = np.array([nd.memory_mib for nd in nodes], dtype=np.int64)
        static = _Static(
            node_ids=_readonly(np.array([nd.node_id for nd in nodes], dtype=object)),
            index=index,
            cluster=_readonly(np.array([nd.cluster for nd in nodes], dtype=object)),
            gpu_model=_readonly(np.array([nd.gpu_model or "" for nd in nodes], dtype=object)),
            num_gpu=_readonly(num_gpu),
            cpu_cap=_readonly(cpu_cap),
            mem_cap=_readonly(mem_cap),
            gpu_cap_milli=_readonly(num_gpu.astype(np.int64) * FULL_GPU_MILLI),
            topology=tuple(dict(nd.topology) for nd in nodes),
            all_true=_readonly(np.ones(n, dtype=bool)),
            zeros=_readonly(np.zeros(n, dtype=np.int32)),
        )
        cpu_free = cpu_cap - np.array([nd.cpu_alloc_milli for nd in nodes], dtype=np.int64)
        mem_free = mem_cap - np.array([nd.memory_alloc_mib for nd in nodes], dtype=np.int64)
        healthy = np.array([nd.healthy for nd in nodes], dtype=bool)
        return cls(static, cpu_free, mem_free, gpu_free, healthy, {})

    def copy(self) -> ClusterSnapshot:
        """An independent copy of the mutable state (static arrays are shared)."""
        c = object.__new__(ClusterSnapshot)
        c._s = self._s
        c.cpu_free = self.cpu_free.copy()
        c.mem_free = self.mem_free.copy()
        c.gpu_free = self.gpu_free.copy()
        c.gpu_free_milli = self.gpu_free_milli.copy()
        c.healthy = self.healthy.copy()
        c._apps = {app: counts.copy() for app, counts in self._apps.items()}
        return c

    def empty(self) -> ClusterSnapshot:
        """The same nodes with nothing running and all healthy (cached; do not mutate)."""
        if self._s.empty is None:
            s = self._s
            gpu_free = np.where(np.arange(self.max_gpus)[None, :] < s.num_gpu[:, None], FULL_GPU_MILLI, PAD)
            self._s.empty = ClusterSnapshot(s, s.cpu_cap.copy(), s.mem_cap.copy(), gpu_free.astype(np.int32),
                                            s.all_true.copy(), {})  # fmt: skip
        return self._s.empty

    # -- static facts ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._s.node_ids)

    @property
    def num_nodes(self) -> int:
        return len(self._s.node_ids)

    @property
    def max_gpus(self) -> int:
        return self.gpu_free.shape[1]

    @property
    def node_ids(self) -> np.ndarray:
        return self._s.node_ids

    @property
    def cluster(self) -> np.ndarray:
        return self._s.cluster

    @property
    def gpu_model(self) -> np.ndarray:
        """GPU model name per node (``""`` for a node without GPUs)."""
        return self._s.gpu_model

    @property
    def num_gpu(self) -> np.ndarray:
        return self._s.num_gpu

    @property
    def cpu_cap(self) -> np.ndarray:
        return self._s.cpu_cap

    @property
    def mem_cap(self) -> np.ndarray:
        return self._s.mem_cap

    @property
    def gpu_cap_milli(self) -> np.ndarray:
        return self._s.gpu_cap_milli

    @property
    def topology(self) -> tuple[dict[str, str], ...]:
        return self._s.topology

    @property
    def all_true(self) -> np.ndarray:
        """A shared read-only all-True mask (for filters that do not apply)."""
        return self._s.all_true

    def index_of(self, node_id: str) -> int:
        try:
            return self._s.index[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    def model_mask(self, models: frozenset[str]) -> np.ndarray:
        """Nodes whose GPU model is in ``models`` (cached, read-only)."""
        mask = self._s.model_masks.get(models)
        if mask is None:
            mask = _readonly(np.isin(self._s.gpu_model, list(models)))
            self._s.model_masks[models] = mask
        return mask

    def cluster_mask(self, cluster: str) -> np.ndarray:
        """Nodes of ``cluster`` (cached, read-only)."""
        mask = self._s.cluster_masks.get(cluster)
        if mask is None:
            mask = _readonly(self._s.cluster == cluster)
            self._s.cluster_masks[cluster] = mask
        return mask

    def topology_values(self, key: str, default: str = "") -> np.ndarray:
        """The ``key`` topology label of every node (e.g. ``rack``), as an object array."""
        return np.array([t.get(key, default) for t in self._s.topology], dtype=object)

    # -- mutable state --------------------------------------------------------------
    def instances(self, app: str) -> np.ndarray:
        """Instances of ``app`` per node (read-only zeros when none run)."""
        return self._apps.get(app, self._s.zeros)

    @property
    def apps(self) -> tuple[str, ...]:
        return tuple(self._apps)

    def set_healthy(self, node_index: int, healthy: bool) -> None:
        self.healthy[node_index] = healthy

    def reserve(self, node_index: int, job: Holder, gpu_indices: Sequence[int] = (), *,
                check: bool = True) -> None:  # fmt: skip
        """Subtract ``job``'s resources from node ``node_index`` (GPUs ``gpu_indices``).

        ``check=False`` skips the capacity check (a reservation the worker must honour
        even if telemetry says the node is over-committed); indices are always checked.
        """
        idx = self._gpu_slots(node_index, job, gpu_indices)
        per = job.per_gpu_milli
        if check:
            short = []
            if self.cpu_free[node_index] < job.cpu_milli:
                short.append(f"cpu {self.cpu_free[node_index]}m free < {job.cpu_milli}m")
            if self.mem_free[node_index] < job.memory_mib:
                short.append(f"memory {self.mem_free[node_index]}Mi free < {job.memory_mib}Mi")
            short += [f"GPU {g} has {self.gpu_free[node_index, g]} free < {per}"
                      for g in idx if self.gpu_free[node_index, g] < per]  # fmt: skip
            if short:
                raise CapacityError(f"job {job.job_id} does not fit node {self.node_ids[node_index]}: "
                                    + "; ".join(short))  # fmt: skip
        self.cpu_free[node_index] -= job.cpu_milli
        self.mem_free[node_index] -= job.memory_mib
        if idx:
            self.gpu_free[node_index, idx] -= per
            self.gpu_free_milli[node_index] -= per * len(idx)
        if job.app:
            counts = self._apps.get(job.app)
            if counts is None:
                counts = self._apps[job.app] = np.zeros(self.num_nodes, dtype=np.int32)
            counts[node_index] += 1

    allocate = reserve

    def free(self, node_index: int, job: Holder, gpu_indices: Sequence[int] = (), *,
             check: bool = True) -> None:  # fmt: skip
        """Give ``job``'s resources on node ``node_index`` back (the inverse of :meth:`reserve`)."""
        idx = self._gpu_slots(node_index, job, gpu_indices)
        per = job.per_gpu_milli
        if check:
            over = (self.cpu_free[node_index] + job.cpu_milli > self.cpu_cap[node_index]
                    or self.mem_free[node_index] + job.memory_mib > self.mem_cap[node_index]
                    or any(self.gpu_free[node_index, g] + per > FULL_GPU_MILLI for g in idx))  # fmt: skip
            if over:
                raise CapacityError(f"freeing job {job.job_id} exceeds node {self.node_ids[node_index]}'s capacity")
        self.cpu_free[node_index] += job.cpu_milli
        self.mem_free[node_index] += job.memory_mib
        if idx:
            self.gpu_free[node_index, idx] += per
            self.gpu_free_milli[node_index] += per * len(idx)
        if job.app and job.app in self._apps:
            counts = self._apps[job.app]
            counts[node_index] = max(0, counts[node_index] - 1)

    def _gpu_slots(self, node_index: int, job: Holder, gpu_indices: Sequence[int]) -> list[int]:
        if not 0 <= node_index < self.num_nodes:
            raise IndexError(f"node index {node_index} out of range 0..{self.num_nodes - 1}")
        idx = [int(g) for g in gpu_indices]
        if len(idx) != job.num_gpu:
            raise ValueError(f"job {job.job_id} needs {job.num_gpu} GPU index(es), got {idx}")
        if len(set(idx)) != len(idx):
            raise ValueError(f"duplicate GPU indices {idx}")
        have = int(self._s.num_gpu[node_index])
        if any(not 0 <= g < have for g in idx):
            raise ValueError(f"GPU indices {idx} out of range for node {self.node_ids[node_index]} ({have} GPUs)")
        return idx
