"""The pair features a Triton server computes itself from a request's compact node arrays.

A request carries :class:`~inference.features.node_arrays.NodeArrays` (~90 kB at 1,213 nodes; with
FGD's workload columns also the nodes' GPU models and health) instead of the pair features
(~3–4 MB); :class:`ServedPairs` turns them
back into the same ``[S, N, P]`` array the client would have sent, with the client's own code
(:class:`inference.features.pair_cache.PairCache` over
:func:`inference.features.pairs.local_pairs`), so the scores do not change.

Between two requests of one worker little changes, so the server keeps what the pair cache
needs: one :class:`~scheduling.node_table.NodeTable` per distinct capacity content (a worker's
cluster; the cache keys on the table object) and one pair cache per table, for the
``tables`` most recently seen clusters. The cache also keys on the feature spec object, which is
the served version's (a new version starts it over). Not thread-safe: the policy model calls it
under its lock.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from inference.features.node_arrays import NodeArrays
from inference.features.pair_cache import PairCache
from inference.features.spec import FeatureSpec
from scheduling.job import JobRequest
from scheduling.node_table import NodeTable


class ServedPairs:
    def __init__(self, tables: int = 4, max_shapes: int = 512) -> None:
        self.tables, self.max_shapes = tables, max_shapes
        self._entries: OrderedDict[bytes, tuple[NodeTable, PairCache]] = OrderedDict()
        self._jobs: dict[tuple[object, ...], JobRequest] = {}  # one job per shape seen (building them costs)

    def __len__(self) -> int:
        return len(self._entries)

    def __call__(self, source: NodeArrays, spec: FeatureSpec) -> np.ndarray:
        """float32 ``[S, N, spec.pair_dim]``: the pair features of ``source``'s shapes on its nodes."""
        if spec.workload and not source.fgd:
            raise ValueError("this model's feature spec has FGD workload columns: a compact request needs "
                             "NODE_MODELS, MODEL_NAMES, HEALTHY and SHAPE_MODELS (or PAIRS)")  # fmt: skip
        key = source.capacity_key()
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = (source.table(), PairCache(self.max_shapes))
            while len(self._entries) > self.tables:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        table, cache = entry
        return cache.pairs(self.jobs(source), source.snapshot(table), spec)

    def jobs(self, source: NodeArrays) -> list[JobRequest]:
        """``source.jobs()``, the ones of shapes seen before reused."""
        made: list[JobRequest] | None = None
        out = []
        for i, key in enumerate(source.shape_keys()):
            job = self._jobs.get(key)
            if job is None:
                made = made or source.jobs()
                job = self._jobs[key] = made[i]
            out.append(job)
        if len(self._jobs) > 8 * self.max_shapes:
            self._jobs.clear()
        return out
