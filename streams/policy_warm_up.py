"""The policy's warm-up steps in the worker: one before the first real step, and one on each
cluster's new node table while no job waits.

A model-backed policy (``learned``) pays a cold start on its first call: torch's first
forward pass, the text encoder's loading (seconds for MiniLM), a Triton connection; and on each
node table it has not seen, the per-table state (topology, node features, FGD's tables, the
pair features). Its ``warm_up(snapshot=None)`` runs a made-up step
(:mod:`inference.warm_up`) and leaves no step state behind. Here: once at start, on a made-up
cluster, and, while the worker idles, on a cluster whose node table is new (its first
inventory, nodes that joined or left) once its node count has not changed for
``SETTLE_S``, one cluster per idle tick (found by review: every changed cluster in one tick held
the first job to arrive for all of them). Both go the way a real step goes (the model call on the backend's thread or
server, the in-step re-scoring on the loop's), so what a real step reaches is what got
warmed. The loop awaits them (no step runs meanwhile; the agents keep consuming while the
model call runs). Policies without ``warm_up`` (the
heuristics) skip all of it. The loop's stats count them (``warm_ups``, ``warm_up_s``; ``/status``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scheduling.node_table import NodeTable
from scheduling.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from streams.loop import SchedulingLoop

log = logging.getLogger("semsched.loop")

SETTLE_S = 1.0


class PolicyWarmUp:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self.warmed: dict[str, NodeTable] = {}  # per cluster: the node table warmed up on
        loop.stats.setdefault("warm_ups", 0)
        loop.stats.setdefault("warm_up_s", 0.0)

    async def at_start(self) -> None:
        """The made-up step, before the first real one."""
        await self._run(None, "at start")

    async def idle_clusters(self) -> None:
        """While no job waits: each cluster with a new, settled node table (module docstring)."""
        if getattr(self.loop.policy, "warm_up", None) is None:
            return
        tables, due = self.loop.tables, None
        for cluster, views in self.loop.views.nodes(self.loop.owned).items():
            self.loop.track_inventory(cluster, len(views))  # (every cluster's, each tick)
            table = tables.get(cluster)
            if due is None and time.time() - self.loop.inventory_since(cluster) >= SETTLE_S and not (
                    table is not None and self.warmed.get(cluster) is table and table.matches(views)):  # fmt: skip
                due = cluster, views, table
        if due is not None:  # one per idle tick: a job that arrives meanwhile waits for one warm-up, not every cluster's
            cluster, views, table = due
            snap = ClusterSnapshot.from_nodes(views, table=table)
            tables[cluster] = self.warmed[cluster] = snap.table
            await self._run(snap, f"on cluster {cluster} ({len(views)} nodes)")

    async def _run(self, snapshot: ClusterSnapshot | None, where: str) -> None:
        warm = getattr(self.loop.policy, "warm_up", None)
        if warm is None:
            return
        try:
            took = await warm(snapshot)
        except Exception:  # a failed warm-up costs the first step its speed, nothing else
            log.exception("policy warm-up %s failed", where)
            return
        self.loop.stats["warm_ups"] += 1
        self.loop.stats["warm_up_s"] += took
        log.info("policy %s warmed up %s in %.0f ms", self.loop.policy.name, where, took * 1000)
