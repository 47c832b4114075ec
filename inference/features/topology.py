"""The topology G_t: which nodes exchange messages in the fusion encoder.

- **labels**: when nodes carry a ``rack`` label (else ``zone``) in ``snapshot.topology``,
  nodes of one group are neighbours: ``groups[i]`` is the group id of node ``i`` and the
  encoder aggregates by group mean (a clique per rack without materialising its edges).
  Nodes without the label form their own singleton group.
- **knn**: otherwise (openb, dlrm, Google 2011 carry no racks) a k-nearest-neighbour graph
  over the STATIC node features (capacities and GPU model, :func:`static_node_features`):
  ``neighbours[i]`` are the ``k`` most similar other nodes (Euclidean; among equally similar
  nodes the ones that follow ``i`` in index order, cyclically, so identical nodes form a ring
  rather than all pointing at the same first ``k``),
  so the encoder sees how loaded comparable nodes are. Built in row chunks (memory
  ``chunk × N``), once per node table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference.features.nodes import static_node_features
from inference.features.spec import FeatureSpec
from scheduling.snapshot import ClusterSnapshot

LABEL_KEYS = ("rack", "zone")


@dataclass(frozen=True, eq=False)
class Topology:
    kind: str  # "labels" or "knn"
    groups: np.ndarray | None  # int64 [N] (labels)
    neighbours: np.ndarray | None  # int64 [N, k] (knn)

    @property
    def num_nodes(self) -> int:
        arr = self.groups if self.groups is not None else self.neighbours
        assert arr is not None
        return len(arr)


def knn(features: np.ndarray, k: int, chunk: int = 1024) -> np.ndarray:
    """int64 ``[N, min(k, N-1)]``: each row's nearest other rows (a row with no others: itself)."""
    n = len(features)
    if n <= 1:
        return np.zeros((n, 1), dtype=np.int64)
    k = min(k, n - 1)
    x = features.astype(np.float64)
    sq = (x * x).sum(axis=1)
    out = np.empty((n, k), dtype=np.int64)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        d = sq[a:b, None] + sq[None, :] - 2.0 * x[a:b] @ x.T
        d = np.round(np.maximum(d, 0.0), 9)  # exact ties stay exact before the tie-break
        d += 1e-6 * (((np.arange(n)[None, :] - np.arange(a, b)[:, None]) % n) / n)  # ties: the next nodes
        d[np.arange(b - a), np.arange(a, b)] = np.inf
        out[a:b] = np.argsort(d, axis=1, kind="stable")[:, :k]
    return out


def build_topology(snapshot: ClusterSnapshot, spec: FeatureSpec, k: int = 8) -> Topology:
    """G_t of ``snapshot`` (cached per node table)."""

    def build(s: ClusterSnapshot) -> Topology:
        for key in LABEL_KEYS:
            values = s.topology_values(key)
            if any(values):
                labels = np.array([v if v else f"\0node{i}" for i, v in enumerate(values)], dtype=object)
                _, groups = np.unique(labels.astype(str), return_inverse=True)
                return Topology("labels", groups.astype(np.int64), None)
        return Topology("knn", None, knn(static_node_features(s, spec), k))

    return snapshot.static_cache(("inference:topology", spec.gpu_models, k), build)
