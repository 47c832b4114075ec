"""``NodeTable``: the static, shared half of a cluster snapshot.

Per-node facts that do not change while jobs come and go — ids, cluster, GPU model,
capacities, topology — as read-only numpy arrays, plus caches of masks and other
values derived from them. Every copy of a :class:`~scheduling.snapshot.ClusterSnapshot`
shares one table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduling.node import NodeView
from scheduling.resources import FULL_GPU_MILLI


def readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(eq=False)
class NodeTable:
    node_ids: np.ndarray
    index: dict[str, int]
    cluster: np.ndarray
    gpu_model: np.ndarray  # "" for a node without GPUs
    num_gpu: np.ndarray
    cpu_cap: np.ndarray
    mem_cap: np.ndarray
    gpu_cap_milli: np.ndarray
    topology: tuple[dict[str, str], ...]
    all_true: np.ndarray
    zeros: np.ndarray
    model_masks: dict[frozenset[str], np.ndarray] = field(default_factory=dict)
    cluster_masks: dict[str, np.ndarray] = field(default_factory=dict)
    derived: dict[object, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: Sequence[NodeView]) -> NodeTable:
        index: dict[str, int] = {}
        for i, node in enumerate(nodes):
            if node.node_id in index:
                raise ValueError(f"duplicate node id {node.node_id!r}")
            index[node.node_id] = i
        n = len(nodes)
        num_gpu = np.array([nd.num_gpu for nd in nodes], dtype=np.int32)
        return cls(
            node_ids=readonly(np.array([nd.node_id for nd in nodes], dtype=object)),
            index=index,
            cluster=readonly(np.array([nd.cluster for nd in nodes], dtype=object)),
            gpu_model=readonly(np.array([nd.gpu_model or "" for nd in nodes], dtype=object)),
            num_gpu=readonly(num_gpu),
            cpu_cap=readonly(np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)),
            mem_cap=readonly(np.array([nd.memory_mib for nd in nodes], dtype=np.int64)),
            gpu_cap_milli=readonly(num_gpu.astype(np.int64) * FULL_GPU_MILLI),
            topology=tuple(dict(nd.topology) for nd in nodes),
            all_true=readonly(np.ones(n, dtype=bool)),
            zeros=readonly(np.zeros(n, dtype=np.int32)),
        )

    def matches(self, nodes: Sequence[NodeView]) -> bool:
        """Whether ``nodes`` (in this order) have exactly this table's static facts: then a new
        snapshot of them can share this table, and every cache derived from it (a control loop
        snapshots the same nodes step after step; their free capacity is the snapshot's, not ours)."""
        if len(nodes) != len(self.node_ids):
            return False
        gpus, cpu, mem = self.num_gpu.tolist(), self.cpu_cap.tolist(), self.mem_cap.tolist()
        return all(nd.node_id == i and nd.cluster == c and (nd.gpu_model or "") == m and nd.num_gpu == g
                   and nd.cpu_milli == cp and nd.memory_mib == me and nd.topology == t
                   for nd, i, c, m, g, cp, me, t in zip(nodes, self.node_ids, self.cluster, self.gpu_model, gpus,
                                                         cpu, mem, self.topology, strict=True))  # fmt: skip

    def model_mask(self, models: frozenset[str]) -> np.ndarray:
        mask = self.model_masks.get(models)
        if mask is None:
            mask = self.model_masks[models] = readonly(np.isin(self.gpu_model, list(models)))
        return mask

    def cluster_mask(self, cluster: str) -> np.ndarray:
        mask = self.cluster_masks.get(cluster)
        if mask is None:
            mask = self.cluster_masks[cluster] = readonly(self.cluster == cluster)
        return mask

    def cached(self, key: object, compute: Callable[[], Any]) -> Any:
        if key not in self.derived:
            self.derived[key] = compute()
        return self.derived[key]
