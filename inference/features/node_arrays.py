"""The compact arrays a step's node-local pair features are computed from.

A step's pair features (:func:`inference.features.pairs.pair_features_many`, ``[S, N, P]``
float32: ~3 MB at 51 shapes × 1,213 nodes) are a function of a few integers per node and four
per distinct job shape. A model whose feature spec has no FGD workload columns
(``spec.workload`` empty) needs nothing else: :data:`~inference.features.spec.PAIR` reads the
node's capacities (cpu, memory, GPU count; the GPU milli capacity is the count × 1000) and free
state (cpu, memory, each GPU's free milli), ``spec.cluster``'s priority column only the node
count. :class:`NodeArrays` holds exactly that (~90 kB at 1,213 nodes), so that a Triton server can
compute the pair features itself with the same code (:mod:`inference.serving.pairs`) instead of
receiving them. FGD's columns (``spec.workload``) also read each node's GPU model and health and
the GPU models a shape accepts (whether it fits); for such a spec the arrays carry those too
(``fgd=True``: ``models``, ``model_names``, ``healthy``, ``shape_models``, ~3 kB more). FGD's tie set
depends on the whole cluster, which the server has.

The arrays are copies of the snapshot's state when the step's inputs were built (the
capacities are the node table's read-only arrays, shared).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.node_table import NodeTable
from scheduling.snapshot import ClusterSnapshot

#: the columns of ``caps`` and ``shapes``
CAPS = ("cpu_cap", "mem_cap", "num_gpu")
FREE = ("cpu_free", "mem_free")
SHAPE = ("cpu_milli", "memory_mib", "num_gpu", "per_gpu_milli")


MAX_MODEL_NAMES = 63  # a shape's accepted GPU models travel as a bit mask over the names (int64)


def _caps(s: ClusterSnapshot) -> np.ndarray:
    out = np.stack([s.cpu_cap, s.mem_cap, s.num_gpu]).T.astype(np.int64)
    out.setflags(write=False)
    return out


def _node_models(s: ClusterSnapshot) -> tuple[tuple[str, ...], np.ndarray]:
    """The table's distinct GPU model names (sorted) and each node's index among them (-1: none)."""
    names = tuple(sorted({str(m) for m in s.gpu_model if m}))
    index = {m: i for i, m in enumerate(names)}
    out = np.array([index.get(str(m), -1) if m else -1 for m in s.gpu_model], dtype=np.int32)
    out.setflags(write=False)
    return names, out


@dataclass(frozen=True, eq=False)
class NodeArrays:
    """``caps`` int64 ``[N, 3]`` (:data:`CAPS`), ``free`` int64 ``[N, 2]`` (:data:`FREE`),
    ``gpu_free`` int32 ``[N, G]`` (milli per GPU, ``-1`` for GPUs a node does not have) and the
    step's distinct shapes ``shapes`` int64 ``[S, 4]`` (:data:`SHAPE`), in the order of the
    step's ``pairs`` rows. With FGD's columns also ``models`` int32 ``[N]`` (index into
    ``model_names``, -1 without a GPU model), ``healthy`` bool ``[N]`` and ``shape_models`` int64
    ``[S]`` (bit ``i`` set: the shape accepts ``model_names[i]``; 0: any model); ``model_names`` are
    the table's models, then any only the shapes name."""

    caps: np.ndarray
    free: np.ndarray
    gpu_free: np.ndarray
    shapes: np.ndarray
    models: np.ndarray | None = None
    model_names: tuple[str, ...] = ()
    healthy: np.ndarray | None = None
    shape_models: np.ndarray | None = None

    DTYPES = {"caps": np.int64, "free": np.int64, "gpu_free": np.int32, "shapes": np.int64}
    FGD_DTYPES = {"models": np.int32, "healthy": np.bool_, "shape_models": np.int64}

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, jobs: Sequence[JobRequest], *, fgd: bool = False) -> NodeArrays:
        """The arrays of ``snapshot`` as it is now, for ``jobs`` (one per distinct shape); ``fgd``:
        with what FGD's columns read (ValueError beyond :data:`MAX_MODEL_NAMES` GPU models)."""
        shapes = np.array([[j.cpu_milli, j.memory_mib, j.num_gpu, j.per_gpu_milli] for j in jobs],
                          dtype=np.int64).reshape(len(jobs), 4)  # fmt: skip
        out = cls(caps=snapshot.static_cache("inference:node-caps", _caps),
                  free=np.stack([snapshot.cpu_free, snapshot.mem_free], axis=1).astype(np.int64),
                  gpu_free=snapshot.gpu_free.astype(np.int32, copy=True), shapes=shapes)  # fmt: skip
        if not fgd:
            return out
        names, models = snapshot.static_cache("inference:node-models", _node_models)
        extra = sorted({m for j in jobs for m in j.gpu_models} - set(names))
        names = (*names, *extra)
        if len(names) > MAX_MODEL_NAMES:
            raise ValueError(f"{len(names)} GPU models: compact node arrays carry at most {MAX_MODEL_NAMES}")
        bit = {m: 1 << i for i, m in enumerate(names)}
        masks = np.array([sum(bit[m] for m in j.gpu_models) for j in jobs], dtype=np.int64)
        return replace(out, models=models, model_names=names, healthy=snapshot.healthy.copy(), shape_models=masks)

    @property
    def fgd(self) -> bool:
        return self.models is not None

    def arrays(self) -> dict[str, np.ndarray]:
        """The named arrays (``model_names`` as a bytes array, at least one entry: a wire cannot
        carry an empty tensor)."""
        out = {name: getattr(self, name) for name in self.DTYPES}
        if self.fgd:
            out |= {name: getattr(self, name) for name in self.FGD_DTYPES}
            out["model_names"] = np.array([m.encode() for m in self.model_names] or [b""], dtype=np.object_)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> NodeArrays:
        """From named arrays (a request's), checked for dtypes and agreeing shapes; FGD's arrays
        all or none."""
        a = {name: np.ascontiguousarray(arrays[name], dtype=dtype) for name, dtype in cls.DTYPES.items()}
        n = len(a["caps"])
        ok = (a["caps"].shape == (n, 3) and a["free"].shape == (n, 2) and a["gpu_free"].ndim == 2
              and len(a["gpu_free"]) == n and a["gpu_free"].shape[1] >= 1 and a["shapes"].ndim == 2
              and a["shapes"].shape[1] == 4)  # fmt: skip
        if not ok:
            raise ValueError("node arrays: inconsistent shapes " + str({k: v.shape for k, v in a.items()}))
        if n and (a["caps"].min() < 0 or a["caps"][:, 2].max() > a["gpu_free"].shape[1]):
            raise ValueError("node arrays: negative capacities or more GPUs than gpu_free has columns")
        fgd = [name for name in (*cls.FGD_DTYPES, "model_names") if name in arrays]
        if not fgd:
            return cls(**a)
        if len(fgd) != len(cls.FGD_DTYPES) + 1:
            raise ValueError(f"node arrays: FGD's arrays come together; got only {', '.join(fgd)}")
        f = {name: np.ascontiguousarray(arrays[name], dtype=dtype) for name, dtype in cls.FGD_DTYPES.items()}
        names = tuple(m.decode() if isinstance(m, bytes) else str(m) for m in np.asarray(arrays["model_names"]).ravel())
        names = () if names == ("",) else names
        if f["models"].shape != (n,) or f["healthy"].shape != (n,) or f["shape_models"].shape != (len(a["shapes"]),):
            raise ValueError("node arrays: models / healthy / shape_models do not match the nodes and shapes")
        if n and (f["models"].min() < -1 or f["models"].max() >= len(names)) or len(names) > MAX_MODEL_NAMES:
            raise ValueError("node arrays: a node's GPU model index is outside model_names")
        if len(f["shape_models"]) and (f["shape_models"].min() < 0 or f["shape_models"].max() >> len(names)):
            raise ValueError("node arrays: a shape accepts GPU models beyond model_names")
        return cls(**a, **f, model_names=names)

    @property
    def num_nodes(self) -> int:
        return len(self.caps)

    def capacity_key(self) -> bytes:
        """What the node table depends on (the static half: equal keys, equal tables)."""
        if not self.fgd:
            return self.caps.tobytes()
        assert self.models is not None
        used = self.model_names[: int(self.models.max(initial=-1)) + 1]
        return self.caps.tobytes() + self.models.tobytes() + "\0".join(used).encode()

    def table(self) -> NodeTable:
        """A node table with these capacities (ids ``"0"…``; GPU models when the arrays have them):
        built once per distinct ``capacity_key``, it is all the pair columns read of a table."""
        models = [None] * self.num_nodes if self.models is None else \
            [self.model_names[m] if m >= 0 else None for m in self.models.tolist()]  # fmt: skip
        return NodeTable.build([NodeView(node_id=str(i), cpu_milli=int(c), memory_mib=int(m), num_gpu=int(g),
                                         gpu_model=model)
                                for i, ((c, m, g), model) in enumerate(zip(self.caps.tolist(), models, strict=True))])  # fmt: skip

    def snapshot(self, table: NodeTable) -> ClusterSnapshot:
        """The free state on ``table`` (health from the arrays; every node healthy without FGD's
        arrays: the node-local pair columns do not read it)."""
        if len(table.cpu_cap) != self.num_nodes:
            raise ValueError(f"node arrays of {self.num_nodes} nodes on a table of {len(table.cpu_cap)}")
        healthy = table.all_true if self.healthy is None else self.healthy
        return ClusterSnapshot(table, np.ascontiguousarray(self.free[:, 0]), np.ascontiguousarray(self.free[:, 1]),
                               self.gpu_free, healthy)  # fmt: skip

    def shape_keys(self) -> list[tuple[int, int, int, int, frozenset[str]]]:
        """Each shape row with the GPU models it accepts (what its pair rows depend on)."""
        masks = [0] * len(self.shapes) if self.shape_models is None else self.shape_models.tolist()
        return [(c, m, g, p, frozenset(n for b, n in enumerate(self.model_names) if mask >> b & 1))
                for (c, m, g, p), mask in zip(self.shapes.tolist(), masks, strict=True)]  # fmt: skip

    def jobs(self) -> list[JobRequest]:
        """One job per shape row (all the pair features read of a job), with its accepted GPU models."""
        return [JobRequest(job_id=f"shape-{i}", cpu_milli=c, memory_mib=m, num_gpu=g, per_gpu_milli=p, gpu_models=models)
                for i, (c, m, g, p, models) in enumerate(self.shape_keys())]  # fmt: skip
