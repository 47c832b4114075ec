"""The pair features a Triton server computes itself from a request's compact node arrays.

A request for a model without FGD workload columns carries :class:`~inference.features.node_arrays.NodeArrays`
(~90 kB at 1,213 nodes) instead of the pair features (~3 MB); :class:`ServedPairs` turns them
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
from dataclasses import replace

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
        self._jobs: dict[tuple[int, ...], JobRequest] = {}  # one job per shape row seen (building them costs)

    def __len__(self) -> int:
        return len(self._entries)

    def __call__(self, source: NodeArrays, spec: FeatureSpec) -> np.ndarray:
        """float32 ``[S, N, spec.pair_dim]``: the pair features of ``source``'s shapes on its nodes."""
        if spec.workload:
            raise ValueError("this model's feature spec has FGD workload columns: its requests must carry PAIRS")
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
        rows = [tuple(r) for r in source.shapes.tolist()]
        new = list(dict.fromkeys(r for r in rows if r not in self._jobs))
        if new:
            if len(self._jobs) + len(new) > 8 * self.max_shapes:
                self._jobs.clear()
                new = list(dict.fromkeys(rows))
            shapes = np.array(new, dtype=np.int64).reshape(-1, 4)
            self._jobs.update(zip(new, replace(source, shapes=shapes).jobs(), strict=True))
        return [self._jobs[r] for r in rows]
