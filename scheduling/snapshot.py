"""``ClusterSnapshot``: the cluster as numpy arrays over nodes, cheap to copy and update.

Static per-node facts live in a shared :class:`~scheduling.node_table.NodeTable`; the
mutable state is copied: free cpu/memory, ``gpu_free`` (``nodes × max_gpus`` milli-GPU,
padding columns — GPUs a node does not have — set to ``-1`` so nothing fits them), health
and per-app instance counts. ``gpu_free_milli`` (sum), ``gpu_max_free`` (largest free
share) and ``gpu_full_free`` (fully free GPUs) are derived per node and kept current.

The worker rebuilds a snapshot every step from inventory plus its reservations
(:meth:`reserve`); the simulator reserves and :meth:`free` s as jobs start and finish.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from scheduling.node import NodeView
from scheduling.node_table import NodeTable
from scheduling.resources import FULL_GPU_MILLI

__all__ = ["PAD", "CapacityError", "ClusterSnapshot", "Holder", "NodeView"]

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


class ClusterSnapshot:
    """Numpy arrays over the nodes of a cluster (see the module docstring)."""

    __slots__ = ("table", "cpu_free", "mem_free", "gpu_free", "gpu_free_milli", "gpu_max_free",
                 "gpu_full_free", "healthy", "_apps", "_caps")  # fmt: skip

    def __init__(self, table: NodeTable, cpu_free: np.ndarray, mem_free: np.ndarray, gpu_free: np.ndarray,
                 healthy: np.ndarray, apps: dict[str, np.ndarray] | None = None) -> None:  # fmt: skip
        self.table = table
        self.cpu_free = cpu_free
        self.mem_free = mem_free
        self.gpu_free = gpu_free
        self.gpu_free_milli = np.where(gpu_free > 0, gpu_free, 0).sum(axis=1, dtype=np.int64)
        self.gpu_max_free = gpu_free.max(axis=1)
        self.gpu_full_free = np.count_nonzero(gpu_free >= FULL_GPU_MILLI, axis=1).astype(np.int32)
        self.healthy = healthy
        self._apps = apps or {}
        # per app, per max_instances_per_node: how many instances with that limit each node runs (the limit of
        # an instance already there binds a newcomer too, as kube-scheduler's anti-affinity is symmetric)
        self._caps: dict[str, dict[int, np.ndarray]] = {}

    @classmethod
    def from_nodes(cls, nodes: Iterable[NodeView], *, table: NodeTable | None = None) -> ClusterSnapshot:
        """A snapshot of ``nodes`` (in this order), with their allocations subtracted. ``table``: the
        previous snapshot's, shared if the nodes' static facts did not change (:meth:`NodeTable.matches`),
        so what is cached per table (topology, FGD's tables, the learned policy's pair features)
        carries over."""
        nodes = list(nodes)
        if table is None or not table.matches(nodes):
            table = NodeTable.build(nodes)
        width = max(1, int(table.num_gpu.max(initial=0)))
        gpu_free = np.full((len(nodes), width), PAD, dtype=np.int32)
        for i, nd in enumerate(nodes):
            gpu_free[i, : nd.num_gpu] = FULL_GPU_MILLI
            if nd.gpu_alloc_milli:
                gpu_free[i, : nd.num_gpu] -= np.asarray(nd.gpu_alloc_milli, dtype=np.int32)
        cpu_free = table.cpu_cap - np.array([nd.cpu_alloc_milli for nd in nodes], dtype=np.int64)
        mem_free = table.mem_cap - np.array([nd.memory_alloc_mib for nd in nodes], dtype=np.int64)
        return cls(table, cpu_free, mem_free, gpu_free, np.array([nd.healthy for nd in nodes], dtype=bool))

    def copy(self) -> ClusterSnapshot:
        """An independent copy of the mutable state (the node table is shared)."""
        c = object.__new__(ClusterSnapshot)
        c.table = self.table
        c.cpu_free = self.cpu_free.copy()
        c.mem_free = self.mem_free.copy()
        c.gpu_free = self.gpu_free.copy()
        c.gpu_free_milli = self.gpu_free_milli.copy()
        c.gpu_max_free = self.gpu_max_free.copy()
        c.gpu_full_free = self.gpu_full_free.copy()
        c.healthy = self.healthy.copy()
        c._apps = {app: counts.copy() for app, counts in self._apps.items()}
        c._caps = {app: {cap: counts.copy() for cap, counts in caps.items()} for app, caps in self._caps.items()}
        return c

    def empty(self) -> ClusterSnapshot:
        """The same nodes with nothing running and all healthy (cached; do not mutate)."""
        return self.table.cached(("empty-snapshot",), self._build_empty)

    def _build_empty(self) -> ClusterSnapshot:
        t = self.table
        slots = np.arange(self.max_gpus)[None, :] < t.num_gpu[:, None]
        gpu_free = np.where(slots, FULL_GPU_MILLI, PAD).astype(np.int32)
        return ClusterSnapshot(t, t.cpu_cap.copy(), t.mem_cap.copy(), gpu_free, t.all_true.copy())

    # -- static facts (shared) --------------------------------------------------------
    def __len__(self) -> int:
        return len(self.table.node_ids)

    @property
    def num_nodes(self) -> int:
        return len(self.table.node_ids)

    @property
    def max_gpus(self) -> int:
        return self.gpu_free.shape[1]

    @property
    def node_ids(self) -> np.ndarray:
        return self.table.node_ids

    @property
    def cluster(self) -> np.ndarray:
        return self.table.cluster

    @property
    def gpu_model(self) -> np.ndarray:
        """GPU model name per node (``""`` for a node without GPUs)."""
        return self.table.gpu_model

    @property
    def num_gpu(self) -> np.ndarray:
        return self.table.num_gpu

    @property
    def cpu_cap(self) -> np.ndarray:
        return self.table.cpu_cap

    @property
    def mem_cap(self) -> np.ndarray:
        return self.table.mem_cap

    @property
    def gpu_cap_milli(self) -> np.ndarray:
        return self.table.gpu_cap_milli

    @property
    def topology(self) -> tuple[dict[str, str], ...]:
        return self.table.topology

    @property
    def all_true(self) -> np.ndarray:
        """A shared read-only all-True mask (for filters that do not apply)."""
        return self.table.all_true

    def index_of(self, node_id: str) -> int:
        try:
            return self.table.index[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    def model_mask(self, models: frozenset[str]) -> np.ndarray:
        """Nodes whose GPU model is in ``models`` (cached, read-only)."""
        return self.table.model_mask(models)

    def cluster_mask(self, cluster: str) -> np.ndarray:
        """Nodes of ``cluster`` (cached, read-only)."""
        return self.table.cluster_mask(cluster)

    def static_cache(self, key: object, compute: Callable[[ClusterSnapshot], Any]) -> Any:
        """``compute(self)`` once per node table, shared by copies — only for values derived
        from static facts (capacities, models, topology), never from free resources."""
        return self.table.cached(key, lambda: compute(self))

    def topology_values(self, key: str, default: str = "") -> np.ndarray:
        """The ``key`` topology label of every node (e.g. ``rack``), as an object array."""
        return np.array([t.get(key, default) for t in self.table.topology], dtype=object)

    # -- mutable state ------------------------------------------------------------------
    def instances(self, app: str) -> np.ndarray:
        """Instances of ``app`` per node (read-only zeros when none run)."""
        return self._apps.get(app, self.table.zeros)

    def instance_cap(self, app: str) -> np.ndarray | None:
        """Per node, the smallest ``max_instances_per_node`` among the instances of ``app`` it runs
        (``iinfo(int32).max`` where none has one); None when no instance of ``app`` has a limit."""
        held = [(cap, counts > 0) for cap, counts in self._caps.get(app, {}).items()]
        held = [(cap, on) for cap, on in held if on.any()]
        if not held:  # (none, or all freed: the same as a snapshot that never held one)
            return None
        out = np.full(self.num_nodes, np.iinfo(np.int32).max, dtype=np.int64)
        for cap, on in held:
            out[on] = np.minimum(out[on], cap)
        return out

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
        i = node_index
        idx = self._gpu_slots(i, job, gpu_indices)
        per = job.per_gpu_milli
        if check:
            short = []
            if self.cpu_free[i] < job.cpu_milli:
                short.append(f"cpu {self.cpu_free[i]}m free < {job.cpu_milli}m")
            if self.mem_free[i] < job.memory_mib:
                short.append(f"memory {self.mem_free[i]}Mi free < {job.memory_mib}Mi")
            short += [f"GPU {g} has {self.gpu_free[i, g]}m free < {per}m" for g in idx if self.gpu_free[i, g] < per]
            if short:
                raise CapacityError(f"job {job.job_id} does not fit node {self.node_ids[i]}: " + "; ".join(short))
        self._apply(i, job, idx, -1)

    allocate = reserve

    def reserve_many(self, holdings: Iterable[tuple[int, Holder, Sequence[int]]]) -> list[tuple[Holder, str]]:
        """:meth:`reserve` with ``check=False`` of every ``(node_index, job, gpu_indices)`` in one
        vectorised pass: what is already held on the nodes, as a control loop rebuilds it every
        step (thousands of running jobs; one ``reserve`` each cost a worker's step 100 ms). The
        same state as reserving them one by one. Returns the holdings refused for their indices
        (a node or GPU index the node does not have), with the reason; the others are applied."""
        refused: list[tuple[Holder, str]] = []
        rows: list[int] = []
        cpu: list[int] = []
        mem: list[int] = []
        gpu: tuple[list[int], list[int], list[int]] = ([], [], [])  # node, GPU, milli
        apps: dict[str, list[int]] = {}
        capped: dict[tuple[str, int], list[int]] = {}
        for i, job, gpu_indices in holdings:
            try:
                idx = self._gpu_slots(i, job, gpu_indices)
            except (IndexError, ValueError) as e:
                refused.append((job, str(e)))
                continue
            rows.append(i)
            cpu.append(job.cpu_milli)
            mem.append(job.memory_mib)
            for g in idx:
                gpu[0].append(i)
                gpu[1].append(g)
                gpu[2].append(job.per_gpu_milli)
            if job.app:
                apps.setdefault(job.app, []).append(i)
                if cap := getattr(job, "max_instances_per_node", None):
                    capped.setdefault((job.app, cap), []).append(i)
        if not rows:
            return refused
        np.subtract.at(self.cpu_free, rows, cpu)
        np.subtract.at(self.mem_free, rows, mem)
        if gpu[0]:
            np.subtract.at(self.gpu_free, (gpu[0], gpu[1]), gpu[2])
            touched = np.unique(gpu[0])
            block = self.gpu_free[touched]
            self.gpu_free_milli[touched] = np.where(block > 0, block, 0).sum(axis=1)  # (as __init__: a GPU over-committed is 0 free, not less)
            self.gpu_max_free[touched] = block.max(axis=1)
            self.gpu_full_free[touched] = np.count_nonzero(block >= FULL_GPU_MILLI, axis=1)
        for app, where in apps.items():
            counts = self._apps.get(app)
            if counts is None:
                counts = self._apps[app] = np.zeros(self.num_nodes, dtype=np.int32)
            np.add.at(counts, where, 1)
        for (app, cap), where in capped.items():
            np.add.at(self._cap_counts(app, cap), where, 1)
        return refused

    def _cap_counts(self, app: str, cap: int) -> np.ndarray:
        per = self._caps.setdefault(app, {})
        counts = per.get(cap)
        if counts is None:
            counts = per[cap] = np.zeros(self.num_nodes, dtype=np.int32)
        return counts

    def free(self, node_index: int, job: Holder, gpu_indices: Sequence[int] = (), *,
             check: bool = True) -> None:  # fmt: skip
        """Give ``job``'s resources on node ``node_index`` back (the inverse of :meth:`reserve`)."""
        i = node_index
        idx = self._gpu_slots(i, job, gpu_indices)
        if check and (self.cpu_free[i] + job.cpu_milli > self.cpu_cap[i]
                      or self.mem_free[i] + job.memory_mib > self.mem_cap[i]
                      or any(self.gpu_free[i, g] + job.per_gpu_milli > FULL_GPU_MILLI for g in idx)):  # fmt: skip
            raise CapacityError(f"freeing job {job.job_id} exceeds node {self.node_ids[i]}'s capacity")
        self._apply(i, job, idx, +1)

    def _apply(self, i: int, job: Holder, idx: list[int], sign: int) -> None:
        self.cpu_free[i] += sign * job.cpu_milli
        self.mem_free[i] += sign * job.memory_mib
        if idx:
            self.gpu_free[i, idx] += sign * job.per_gpu_milli
            row = self.gpu_free[i]
            self.gpu_free_milli[i] = row[row > 0].sum()  # (as __init__: a GPU over-committed is 0 free, not less)
            self.gpu_max_free[i] = row.max()
            self.gpu_full_free[i] = np.count_nonzero(row >= FULL_GPU_MILLI)
        if job.app:
            counts = self._apps.get(job.app)
            if counts is None:
                counts = self._apps[job.app] = np.zeros(self.num_nodes, dtype=np.int32)
            counts[i] = max(0, counts[i] - sign)
            if cap := getattr(job, "max_instances_per_node", None):
                counts = self._cap_counts(job.app, cap)
                counts[i] = max(0, counts[i] - sign)

    def first_difference(self, other: ClusterSnapshot) -> str | None:
        """Where the mutable state of two snapshots of the same nodes first differs (the array and
        the node, this one's value first), or ``None`` when it is equal: every array a policy reads,
        health and the per-app instance counts."""
        for name in ("cpu_free", "mem_free", "gpu_free", "gpu_free_milli", "gpu_max_free", "gpu_full_free", "healthy"):
            x, y = getattr(self, name), getattr(other, name)
            if x.shape != y.shape:
                return f"{name}: shape {x.shape} against {y.shape}"
            bad = np.flatnonzero((x != y).reshape(len(x), -1).any(axis=1))
            if len(bad):
                i = int(bad[0])
                return f"{name} of node {self.node_ids[i]}: {x[i].tolist()} against {y[i].tolist()}"
        for app in sorted(set(self.apps) | set(other.apps)):
            bad = np.flatnonzero(self.instances(app) != other.instances(app))
            if len(bad):
                return f"instances of app {app!r} on node {self.node_ids[int(bad[0])]}"
            mine, theirs = self.instance_cap(app), other.instance_cap(app)
            if (mine is None) != (theirs is None) or (mine is not None and (mine != theirs).any()):
                return f"the per-node limits of app {app!r}'s instances"
        return None

    def _gpu_slots(self, node_index: int, job: Holder, gpu_indices: Sequence[int]) -> list[int]:
        if not 0 <= node_index < self.num_nodes:
            raise IndexError(f"node index {node_index} out of range 0..{self.num_nodes - 1}")
        idx = [int(g) for g in gpu_indices]
        if len(idx) != job.num_gpu:
            raise ValueError(f"job {job.job_id} needs {job.num_gpu} GPU index(es), got {idx}")
        if len(set(idx)) != len(idx):
            raise ValueError(f"duplicate GPU indices {idx}")
        have = int(self.table.num_gpu[node_index])
        if any(not 0 <= g < have for g in idx):
            raise ValueError(f"GPU indices {idx} out of range for node {self.node_ids[node_index]} ({have} GPUs)")
        return idx
