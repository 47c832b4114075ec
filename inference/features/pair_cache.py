"""Pair features kept from one scheduling step to the next.

A step's pair features (:func:`inference.features.pairs.pair_features_many`, once per distinct
job shape) are most of its input cost, and between two steps little changes: the shapes
pending are mostly the same, and only the nodes that a placement, a finish or a health
report touched have a new free capacity. Every pair column except FGD's tie set and pick
depends on one node's state alone, so :class:`PairCache` keeps each shape's rows and
recomputes, for the shapes a step asks for, only the nodes that changed since that shape
was last brought up to date. A shape seen for the first time is computed whole.

The result is the same array :func:`~inference.features.pairs.pair_features_many` returns
on the snapshot as it is (a test holds the two equal, bit for bit, over placements and
releases). The cache starts over when the node table (nodes joined or left) or the feature
spec (another model version) changes. It keeps at most ``max_shapes`` shapes, dropping the
least recently asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inference.features.fits import shape_fits
from inference.features.pairs import Shape, local_pair_dim, local_pairs, pair_shape
from inference.features.spec import FeatureSpec
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

FRAG_CHUNK = 10_000  # (shape, node) pairs per FGD call (its arrays are that × GPUs × request groups; ~8 shapes at 1,213 nodes)


@dataclass
class PairCacheStats:
    calls: int = 0
    shapes_hit: int = 0
    shapes_new: int = 0
    nodes_recomputed: int = 0  # (shape, node) rows brought up to date


class PairCache:
    def __init__(self, max_shapes: int = 512) -> None:
        self.max_shapes = max_shapes
        self.stats = PairCacheStats()
        self._table: object = None
        self._spec: FeatureSpec | None = None
        self._state: tuple[np.ndarray, ...] | None = None  # free cpu, memory, GPUs, health at the last call
        self._slot: dict[Shape, int] = {}
        self._used: dict[Shape, int] = {}  # shape -> the call that last asked for it
        self._rows = np.zeros((0, 0, 0), dtype=np.float32)  # [slots, N, pair_dim]
        self._dirty = np.zeros((0, 0), dtype=bool)  # [slots, N]: changed since the slot was updated
        self._room = np.zeros((0, 0), dtype=bool)  # [slots, N]: the shape fits by resources (shape_fits)
        self._fits = np.zeros((0, 0), dtype=bool)  # [slots, N]: the shape fits the node (workload specs)
        self._quant = np.zeros((0, 0), dtype=np.float32)  # [slots, N]: FGD's quantised score / 100 (the same)
        self._tie = np.zeros((0, 2, 0), dtype=bool)  # [slots, 2, N]: the tie set and pick, as in the rows

    def __len__(self) -> int:
        return len(self._slot)

    def clear(self) -> None:
        self._table, self._spec, self._state = None, None, None
        self._slot, self._used = {}, {}

    def pairs(self, jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, spec: FeatureSpec) -> np.ndarray:
        """float32 ``[len(jobs), N, spec.pair_dim]``, equal to ``pair_features_many(jobs, snapshot, spec)``.
        ``jobs`` are one per shape (repeats are computed once and returned twice)."""
        return self.pairs_and_room(jobs, snapshot, spec)[0]

    def pairs_and_room(self, jobs: Sequence[JobRequest], snapshot: ClusterSnapshot,
                       spec: FeatureSpec) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """:meth:`pairs` and bool ``[len(jobs), N]``: where each job's shape fits by resources, equal to
        :func:`~inference.features.fits.shape_fits` (a node-local column, kept the same way)."""
        if snapshot.table is not self._table or spec is not self._spec:
            self.clear()
            self._table, self._spec = snapshot.table, spec
            # every slot at once: zeroed pages cost nothing until a shape first writes its slot, while
            # growing by doubling copied the whole cache inside a step (3.3 ms at 128 slots, 6.8 at 256)
            self._allocate(self.max_shapes, snapshot.num_nodes, spec.pair_dim, bool(spec.workload))
        self.stats.calls += 1
        changed = self._changed(snapshot)
        if len(self._slot):
            self._dirty[: self._capacity_used(), np.flatnonzero(changed)] = True  # (in a step: one node, one column)
        keys = [pair_shape(j, spec) for j in jobs]
        first: dict[Shape, JobRequest] = {}
        for key, job in zip(keys, jobs, strict=True):
            first.setdefault(key, job)
        new = [k for k in first if k not in self._slot]
        old = [k for k in first if k in self._slot]
        self.stats.shapes_hit += len(old)
        self.stats.shapes_new += len(new)
        for k in first:
            self._used[k] = self.stats.calls
        self._make_room(len(new), keep=set(first))
        for k in new:
            self._slot[k] = self._free_slot()
            self._dirty[self._slot[k]] = True
        self._update([first[k] for k in first], [self._slot[k] for k in first], snapshot, spec)
        slots = [self._slot[k] for k in keys]
        return self._rows[slots], self._room[slots]

    # -- bringing slots up to date -----------------------------------------------------------
    def _update(self, jobs: list[JobRequest], slots: list[int], snapshot: ClusterSnapshot, spec: FeatureSpec) -> None:
        for group, nodes in self._groups(slots, snapshot.num_nodes):
            self._update_group([jobs[i] for i in group], [slots[i] for i in group], nodes, snapshot, spec)
        if spec.workload:
            self._update_ties(slots, local_pair_dim(spec) + 2)
        self._dirty[slots] = False

    def _groups(self, slots: list[int], n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The slots to bring up to date, as (positions in ``slots``, the nodes to recompute them
        on): those dirty on every node (new shapes, and ones that missed every node's change) on
        all nodes; the rest on the union of their dirty nodes. About ``FRAG_CHUNK`` (shape, node)
        pairs per group, which bounds FGD's arrays (all shapes at once when few nodes changed).
        One slot — a job scored within a step — is one group on its own dirty nodes."""
        if len(slots) == 1:
            nodes = np.flatnonzero(self._dirty[slots[0]])
            self.stats.nodes_recomputed += len(nodes)
            return [(np.zeros(1, dtype=np.int64), nodes)] if len(nodes) else []
        dirty = self._dirty[slots]  # [S, N]
        self.stats.nodes_recomputed += int(dirty.sum())
        whole = dirty.all(axis=1)
        out = []
        for group in (np.flatnonzero(whole), np.flatnonzero(~whole & dirty.any(axis=1))):
            if len(group):
                size = max(1, FRAG_CHUNK // max(1, int(dirty[group].any(axis=0).sum())))
                out += [(part, np.arange(n) if whole[part[0]] else np.flatnonzero(dirty[part].any(axis=0)))
                        for part in np.array_split(group, -(-len(group) // size))]  # fmt: skip
        return out

    def _update_group(self, jobs: list[JobRequest], slots: list[int], nodes: np.ndarray, snapshot: ClusterSnapshot,
                      spec: FeatureSpec) -> None:  # fmt: skip
        """Every column but the tie set and pick of ``slots`` on ``nodes``, in one vectorised call each
        (a row that was current is written with the value it had)."""
        at = np.ix_(slots, nodes)  # [S, 1] and [1, M]
        every = len(nodes) == snapshot.num_nodes
        local = local_pair_dim(spec)
        out = np.empty((local, len(jobs), len(nodes)), dtype=np.float32)
        local_pairs(jobs, snapshot, spec, slice(None) if every else nodes, out)
        self._rows[at[0], at[1], :local] = out.transpose(1, 2, 0)  # [S, M, local]
        room = shape_fits(jobs, snapshot, spec, None if every else nodes)
        self._room[at] = room
        if spec.workload:
            from inference.features.cluster import frag_node_columns, frag_parts_many

            cont, fits = frag_parts_many(jobs, snapshot, spec, nodes, room=room)  # FGD's per-node terms
            columns = frag_node_columns(cont, fits)  # [S, M, 2]
            self._fits[at] = fits
            self._quant[at] = columns[..., 1]
            self._rows[at[0], at[1], local : local + 2] = columns

    def _update_ties(self, slots: list[int], column: int) -> None:
        """The cluster-wide columns (tie set, pick) of every touched slot at once; only the entries
        that moved are written into the rows (a strided write of every one costs ~1 ms)."""
        from inference.features.cluster import frag_tie_sets

        touched = np.asarray(slots, dtype=np.int64)[self._dirty[slots].any(axis=1)]
        if not len(touched):
            return
        now = np.stack(frag_tie_sets(self._quant[touched], self._fits[touched]), axis=1)  # [T, 2, N]
        t, c, n = np.nonzero(now != self._tie[touched])  # both columns in one pass (each pass gathers [T, N])
        self._rows[touched[t], n, column + c] = now[t, c, n]
        self._tie[touched] = now

    def _changed(self, s: ClusterSnapshot) -> np.ndarray:
        """bool ``[N]``: nodes whose free capacity or health differ from the last call (the state kept
        for the next call is brought up to date on those rows only)."""
        now = (s.cpu_free, s.mem_free, s.gpu_free, s.healthy)
        if self._state is None or self._state[2].shape != s.gpu_free.shape:
            self._state = tuple(a.copy() for a in now)
            return np.ones(s.num_nodes, dtype=bool)
        cpu, mem, gpu, healthy = self._state
        changed = (s.cpu_free != cpu) | (s.mem_free != mem) | (s.gpu_free != gpu).any(axis=1) | (s.healthy != healthy)
        rows = np.flatnonzero(changed)
        if len(rows):
            for kept, current in zip(self._state, now, strict=True):
                kept[rows] = current[rows]
        return changed

    # -- slots -----------------------------------------------------------------------------
    def _capacity_used(self) -> int:
        return max(self._slot.values()) + 1 if self._slot else 0

    def _free_slot(self) -> int:
        taken = set(self._slot.values())
        slot = next(i for i in range(len(self._rows) + 1) if i not in taken)
        if slot >= len(self._rows):
            n, p = self._rows.shape[1:]
            self._allocate(max(8, 2 * len(self._rows)), n, p, self._fits.shape[1] > 0)  # one call over max_shapes
        return slot

    def _allocate(self, slots: int, n: int, p: int, workload: bool) -> None:
        """Grow (or, with an empty cache, reset) the slot arrays, keeping what is there."""

        def grow(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
            out = np.zeros(shape, dtype=a.dtype)
            if self._slot and a.size:
                out[: len(a)] = a
            return out

        self._rows = grow(self._rows, (slots, n, p))
        self._room = grow(self._room, (slots, n))
        self._dirty = grow(self._dirty, (slots, n))
        self._fits = grow(self._fits, (slots, n if workload else 0))
        self._quant = grow(self._quant, (slots, n if workload else 0))
        self._tie = grow(self._tie, (slots, 2, n if workload else 0))

    def _make_room(self, coming: int, keep: set[Shape]) -> None:
        """Drop the least recently asked-for shapes (never one of this call's) to stay within ``max_shapes``."""
        excess = len(self._slot) + coming - self.max_shapes
        if excess <= 0:
            return
        for key in sorted((k for k in self._slot if k not in keep), key=self._used.__getitem__)[:excess]:
            del self._slot[key], self._used[key]
