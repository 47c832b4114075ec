"""Per cluster, the snapshot a scheduling step starts from, kept from step to step.

A step starts from the cluster as the worker's tables say: every node's capacity and health,
minus what placed jobs hold. Built afresh at every step (every node view, every holding
parsed and reserved), that cost the worker about a third of its time under the demo's
burst of arrivals, as kube-scheduler's per-cycle snapshot would without its cache. Here, as
there, it is kept and brought up to date with what changed since the last step:

- **holdings** from the :class:`~streams.held_ledger.HeldLedger`'s journal: a job that left
  frees its node, a job placed reserves it;
- **nodes**: a node whose view changed only in health gets its new health; any other change
  (a node joined or left, a capacity or a label changed) builds the snapshot afresh, with a
  new node table only if the static facts moved (:meth:`NodeTable.matches`).

**Verified against a rebuild.** Every ``verify_s`` seconds (``SEMSCHED_SNAPSHOT_VERIFY``; 0:
at every step, as the integration tests run the worker) the kept snapshot is compared with
one built from the ``running`` table itself. A difference is logged as an error with the
first array and node that differ, counted (``snapshot_mismatches`` in ``/status``), and the
rebuilt snapshot is used and kept.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduling.node import NodeView
from scheduling.node_table import NodeTable
from scheduling.snapshot import ClusterSnapshot, Holder
from streams.held_ledger import HeldLedger, Holding

log = logging.getLogger("semsched.worker")


@dataclass
class _Kept:
    views: list[NodeView]
    snap: ClusterSnapshot  # never handed out: steps get copies
    epoch: int  # the ledger's when built
    applied: dict[str, tuple[int, Holding]]  # job id -> (node index, holding) reserved on snap
    verified_at: float


class SnapshotCache:
    def __init__(self, ledger: HeldLedger, *, verify_s: float) -> None:
        self.ledger = ledger
        self.verify_s = verify_s
        self.mismatches = 0
        self.builds = 0  # snapshots built afresh (first step, node changes, the ledger's new epochs)
        # per cluster, the node table to build on, shared with the policy's warm-up (streams/policy_warm_up.py):
        # what is cached per table (topology, FGD's tables, the learned policy's pair features) carries over
        self.tables: dict[str, NodeTable] = {}
        self._kept: dict[str, _Kept] = {}

    def snapshot(self, cluster: str, views: list[NodeView],
                 reference: Callable[[], list[Holding]]) -> ClusterSnapshot:  # fmt: skip
        """A copy of ``cluster``'s snapshot (``views`` in this order), for the caller to reserve on.
        ``reference()``: the cluster's holdings read from the table, for the verification."""
        kept = self._kept.get(cluster)
        changes = None  # None: build afresh (first step, other nodes, a new epoch of the ledger, a long journal)
        if kept is not None and kept.epoch == self.ledger.epoch and self._nodes_follow(kept, views):
            changes = self.ledger.drain(cluster)
        if kept is None or changes is None:
            kept = self._build(cluster, views, kept)
        else:
            self._apply(cluster, kept, changes)
        if time.monotonic() - kept.verified_at >= self.verify_s:
            kept = self._verify(cluster, views, kept, reference)
        return kept.snap.copy()

    def forget(self, keep: set[str]) -> None:
        """Drop the snapshots of clusters not in ``keep``."""
        for cluster in [c for c in self._kept if c not in keep]:
            del self._kept[cluster]

    # -- keeping ------------------------------------------------------------------------
    def _build(self, cluster: str, views: list[NodeView], previous: _Kept | None) -> _Kept:
        self.builds += 1
        self.ledger.drain(cluster)  # what it holds now is in ``held``
        held = self.ledger.held(cluster)
        snap = built_afresh(views, held.values(), self.tables.get(cluster), cluster)
        self.tables[cluster] = snap.snapshot.table
        index = snap.snapshot.table.index
        refused = {job.job_id for job, _ in snap.refused}
        applied = {job_id: (index[h[0]], h) for job_id, h in held.items()
                   if h[0] in index and job_id not in refused}  # fmt: skip
        return self._keep(cluster, _Kept(list(views), snap.snapshot, self.ledger.epoch, applied,
                                         previous.verified_at if previous else 0.0))  # fmt: skip

    def _keep(self, cluster: str, kept: _Kept) -> _Kept:
        self._kept[cluster] = kept
        return kept

    def _apply(self, cluster: str, kept: _Kept, changes: list[tuple[str, Holding | None]]) -> None:
        snap, index = kept.snap, kept.snap.table.index
        for job_id, holding in changes:
            old = kept.applied.pop(job_id, None)
            if old is not None:
                i, (_, req, gpus) = old
                snap.free(i, req, gpus, check=False)
            if holding is not None and (i := index.get(holding[0])) is not None:
                try:
                    snap.reserve(i, holding[1], holding[2], check=False)
                except (IndexError, ValueError) as e:  # e.g. GPU indices that node no longer has
                    log.warning("cannot account %s in cluster %s: %s", job_id, cluster, e)
                    continue
                kept.applied[job_id] = (i, holding)

    @staticmethod
    def _nodes_follow(kept: _Kept, views: list[NodeView]) -> bool:
        """Whether the kept snapshot can follow ``views``: the same nodes in the same order, each
        unchanged or changed in health only (set on it here). Else it is built afresh."""
        if len(views) != len(kept.views):
            return False
        health: list[tuple[int, bool]] = []
        for i, (old, new) in enumerate(zip(kept.views, views, strict=True)):
            if old is not new and old != new:
                if dataclasses.replace(new, healthy=old.healthy) != old:
                    return False
                health.append((i, new.healthy))
        for i, healthy in health:
            kept.snap.set_healthy(i, healthy)
        kept.views = list(views)
        return True

    # -- verifying ----------------------------------------------------------------------
    def _verify(self, cluster: str, views: list[NodeView], kept: _Kept,
                reference: Callable[[], list[Holding]]) -> _Kept:  # fmt: skip
        fresh = built_afresh(views, reference(), kept.snap.table, cluster).snapshot
        kept.verified_at = time.monotonic()
        diff = kept.snap.first_difference(fresh)
        if diff is None:
            return kept
        self.mismatches += 1
        log.error("the kept snapshot of cluster %s differs from one built from the tables (%s; kept first): "
                  "using the rebuilt one (please report this)", cluster, diff)  # fmt: skip
        self.ledger.invalidate()
        return self._keep(cluster, _Kept(list(views), fresh, -1, {}, kept.verified_at))  # rebuilt at the next step


@dataclass
class _Reserved:
    snapshot: ClusterSnapshot
    refused: list[tuple[Holder, str]]


def built_afresh(views: list[NodeView], holdings: Iterable[Holding], table: NodeTable | None, cluster: str) -> _Reserved:
    """``views`` with every holding of ``cluster`` on a known node reserved (unchecked: the worker
    honours what it placed even where telemetry disagrees), as each step used to build it."""
    snap = ClusterSnapshot.from_nodes(views, table=table)
    index = snap.table.index
    held = [(index[node_id], req, gpus) for node_id, req, gpus in holdings
            if req.cluster == cluster and node_id in index]  # fmt: skip
    refused = snap.reserve_many(held)
    for job, why in refused:
        log.warning("cannot account %s in cluster %s: %s", job.job_id, cluster, why)
    return _Reserved(snap, refused)
