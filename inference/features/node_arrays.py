"""The compact arrays a step's node-local pair features are computed from.

A step's pair features (:func:`inference.features.pairs.pair_features_many`, ``[S, N, P]``
float32: ~3 MB at 51 shapes × 1,213 nodes) are a function of a few integers per node and four
per distinct job shape. A model whose feature spec has no FGD workload columns
(``spec.workload`` empty) needs nothing else: :data:`~inference.features.spec.PAIR` reads the
node's capacities (cpu, memory, GPU count; the GPU milli capacity is the count × 1000) and free
state (cpu, memory, each GPU's free milli), ``spec.cluster``'s priority column only the node
count. :class:`NodeArrays` holds exactly that (~90 kB at 1,213 nodes), so that a Triton server can
compute the pair features itself with the same code (:mod:`inference.serving.pairs`) instead of
receiving them. FGD's columns (``spec.workload``) read GPU models, health and the whole
cluster's tie set: those models keep sending the pairs.

The arrays are copies of the snapshot's state when the step's inputs were built (the
capacities are the node table's read-only arrays, shared).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.node_table import NodeTable
from scheduling.snapshot import ClusterSnapshot

#: the columns of ``caps`` and ``shapes``
CAPS = ("cpu_cap", "mem_cap", "num_gpu")
FREE = ("cpu_free", "mem_free")
SHAPE = ("cpu_milli", "memory_mib", "num_gpu", "per_gpu_milli")


def _caps(s: ClusterSnapshot) -> np.ndarray:
    out = np.stack([s.cpu_cap, s.mem_cap, s.num_gpu]).T.astype(np.int64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class NodeArrays:
    """``caps`` int64 ``[N, 3]`` (:data:`CAPS`), ``free`` int64 ``[N, 2]`` (:data:`FREE`),
    ``gpu_free`` int32 ``[N, G]`` (milli per GPU, ``-1`` for GPUs a node does not have) and the
    step's distinct shapes ``shapes`` int64 ``[S, 4]`` (:data:`SHAPE`), in the order of the
    step's ``pairs`` rows."""

    caps: np.ndarray
    free: np.ndarray
    gpu_free: np.ndarray
    shapes: np.ndarray

    DTYPES = {"caps": np.int64, "free": np.int64, "gpu_free": np.int32, "shapes": np.int64}

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, jobs: Sequence[JobRequest]) -> NodeArrays:
        """The arrays of ``snapshot`` as it is now, for ``jobs`` (one per distinct shape)."""
        shapes = np.array([[j.cpu_milli, j.memory_mib, j.num_gpu, j.per_gpu_milli] for j in jobs],
                          dtype=np.int64).reshape(len(jobs), 4)  # fmt: skip
        return cls(caps=snapshot.static_cache("inference:node-caps", _caps),
                   free=np.stack([snapshot.cpu_free, snapshot.mem_free], axis=1).astype(np.int64),
                   gpu_free=snapshot.gpu_free.astype(np.int32, copy=True), shapes=shapes)  # fmt: skip

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.DTYPES}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> NodeArrays:
        """From named arrays (a request's), checked for dtypes and agreeing shapes."""
        a = {name: np.ascontiguousarray(arrays[name], dtype=dtype) for name, dtype in cls.DTYPES.items()}
        n = len(a["caps"])
        ok = (a["caps"].shape == (n, 3) and a["free"].shape == (n, 2) and a["gpu_free"].ndim == 2
              and len(a["gpu_free"]) == n and a["gpu_free"].shape[1] >= 1 and a["shapes"].ndim == 2
              and a["shapes"].shape[1] == 4)  # fmt: skip
        if not ok:
            raise ValueError("node arrays: inconsistent shapes " + str({k: v.shape for k, v in a.items()}))
        if n and (a["caps"].min() < 0 or a["caps"][:, 2].max() > a["gpu_free"].shape[1]):
            raise ValueError("node arrays: negative capacities or more GPUs than gpu_free has columns")
        return cls(**a)

    @property
    def num_nodes(self) -> int:
        return len(self.caps)

    def capacity_key(self) -> bytes:
        """What the node table depends on (the static half: equal keys, equal tables)."""
        return self.caps.tobytes()

    def table(self) -> NodeTable:
        """A node table with these capacities (ids ``"0"…``, no GPU models): built once per
        distinct ``capacity_key``, it is all the node-local pair columns read of a table."""
        return NodeTable.build([NodeView(node_id=str(i), cpu_milli=int(c), memory_mib=int(m), num_gpu=int(g))
                                for i, (c, m, g) in enumerate(self.caps.tolist())])  # fmt: skip

    def snapshot(self, table: NodeTable) -> ClusterSnapshot:
        """The free state on ``table`` (every node healthy: the node-local pair columns do not read health)."""
        if len(table.cpu_cap) != self.num_nodes:
            raise ValueError(f"node arrays of {self.num_nodes} nodes on a table of {len(table.cpu_cap)}")
        return ClusterSnapshot(table, np.ascontiguousarray(self.free[:, 0]), np.ascontiguousarray(self.free[:, 1]),
                               self.gpu_free, table.all_true)  # fmt: skip

    def jobs(self) -> list[JobRequest]:
        """One job per shape row (all the pair features read of a job on a spec without workload)."""
        return [JobRequest(job_id=f"shape-{i}", cpu_milli=c, memory_mib=m, num_gpu=g, per_gpu_milli=p)
                for i, (c, m, g, p) in enumerate(self.shapes.tolist())]  # fmt: skip
