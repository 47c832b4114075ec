"""``gpu-clustering``: keep pods with the same kind of GPU request together.

The published baseline (the simulator's ``GpuClusteringScore``). A pod's affinity is its
kind of GPU request (``share-gpu``, ``1-gpu``, ``2-gpu``, …); a node's affinities are those of
the pods it runs. Integer score bands, each rising by up to 25 as the node fills
(``⌊25 × (8000 − free GPU milli) / 8000⌋``):

- 75–100: the node runs only pods of the pod's affinity;
- 50–75: it runs that affinity among others;
- 25–50: it runs no GPU pod;
- 0–25: it runs only other affinities.

CPU-only pods score 0 everywhere (node priority decides). GPUs inside the node: best fit.

The snapshot does not say which pods a node runs, so the policy records the affinity of
every pod it places (in :meth:`select_gpus`, called once per placement; a placement rolled back
takes it out again: :meth:`forget`) and forgets a node's affinities when the node's GPUs are all
free again (its pods have left). In the
fill benchmark this is exact; in a live worker a node that still runs some pods keeps
the affinities of departed ones until it empties.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.policies.sim_conventions import MAX_NODE_SCORE, MAX_SPEC_GPU, gpu_affinity
from scheduling.snapshot import ClusterSnapshot


@register("gpu-clustering")
class GpuClustering(BasePolicy):
    name = "gpu-clustering"

    def __init__(self) -> None:
        self.affinities: dict[str, Counter[str]] = {}  # node id -> affinity -> pods placed
        self._table: object | None = None
        self._counts: dict[str, np.ndarray] = {}  # affinity -> pods per node of ``_table``

    def _sync(self, snapshot: ClusterSnapshot) -> None:
        """Align the per-node arrays with ``snapshot``'s nodes; forget emptied nodes."""
        n = snapshot.num_nodes
        if snapshot.table is not self._table:
            self._table, self._counts = snapshot.table, {}
            for node_id, counts in self.affinities.items():
                i = snapshot.table.index.get(node_id)
                if i is not None:
                    for tag, c in counts.items():
                        self._counts.setdefault(tag, np.zeros(n, dtype=np.int64))[i] = c
        if self._counts:
            held = np.add.reduce([c for c in self._counts.values()]) > 0
            for i in np.flatnonzero(held & (snapshot.gpu_free_milli == snapshot.gpu_cap_milli)):
                self.affinities.pop(str(snapshot.node_ids[i]), None)
                for c in self._counts.values():
                    c[i] = 0

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        tag = gpu_affinity(job)
        if tag is None:
            return np.zeros(snapshot.num_nodes)
        self._sync(snapshot)
        zeros = snapshot.table.zeros
        same = self._counts.get(tag, zeros)
        kinds = np.add.reduce([c > 0 for c in self._counts.values()], dtype=np.int64) if self._counts else zeros
        quarter = MAX_NODE_SCORE // 4
        fill = quarter * (MAX_SPEC_GPU - snapshot.gpu_free_milli) // MAX_SPEC_GPU
        band = np.where(same > 0, np.where(kinds == 1, 3, 2), np.where(kinds == 0, 1, 0))
        return (fill + band * quarter).astype(np.float64)

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        gpus = best_fit_gpus(snapshot, node_index, job)
        tag = gpu_affinity(job)
        if gpus is not None and tag is not None:
            self._sync(snapshot)
            self.affinities.setdefault(str(snapshot.node_ids[node_index]), Counter())[tag] += 1
            self._counts.setdefault(tag, np.zeros(snapshot.num_nodes, dtype=np.int64))[node_index] += 1
        return gpus

    def forget(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> None:
        """Take out what :meth:`select_gpus` recorded for ``job`` on ``node_index``: the placement was rolled back."""
        tag = gpu_affinity(job)
        node_id = str(snapshot.node_ids[node_index])
        kept = self.affinities.get(node_id)
        if tag is None or kept is None or kept[tag] <= 0:
            return
        kept[tag] -= 1
        if not +kept:
            del self.affinities[node_id]
        counts = self._counts.get(tag)
        if snapshot.table is self._table and counts is not None and counts[node_index] > 0:
            counts[node_index] -= 1
