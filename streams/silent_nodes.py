"""A node whose agent falls silent is marked unhealthy, as Kubernetes' node controller marks a
node whose kubelet stops renewing its lease not ready.

Only ``healthy: false`` moves jobs off a node (:mod:`streams.lost_nodes`), and an agent that dies
with its node says nothing. So an agent reports every node it runs at least every 10 s (the
simulated agents do: ``ops/agents/simulated.py``), and a node that its agent has reported on and
that this worker has not heard from for ``settings.node_silent_s`` (``SEMSCHED_NODE_SILENT``, 40 s;
0: never) gets a report from the worker itself on ``nodes.telemetry``: its last report's state,
``healthy: false``, ``source: "worker"``, stamped 1 ms after that report (so any later report of
its agent supersedes it, whatever the two clocks say). From there it is an unhealthy node like any
other: the filters keep new placements off it, ``lost_nodes`` moves its placements off after
``SEMSCHED_NODE_LOST``, the archive has the report. The agent's next report makes it healthy again.

- Nodes known only from the inventory (a replay with no agents) are never marked: nothing was
  promised for them.
- Heard means a report of the node's agent applied by this worker, timed by this worker's clock;
  a worker that (re)starts or is newly given a partition gives every node the whole interval.
- A node is marked only while this worker has handled its telemetry partition up to the end the
  consumer knows: a worker behind on its input must not take its own lag for silent agents.
- Only the clusters whose partitions this worker owns, and each silence once.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition

from scheduling.events import NodeTelemetry, new_event_id, partition_for

if TYPE_CHECKING:
    from streams.loop import SchedulingLoop

log = logging.getLogger("semsched.worker")


class SilentNodes:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self.marked: dict[str, float] = {}  # node id -> the heard time it was marked silent at
        self._checked = 0.0
        self._owned: set[int] = set()  # the partitions owned at the last pass
        self._passed = 0.0  # when the last pass ran (epoch s, as Worker.holds_since)
        self._committed: dict[int, int] = {}  # per partition owned: the group's committed offset, read once

    async def check(self) -> None:
        """One pass over the nodes, at most once a second."""
        w = self.loop.w
        silent_s = w.settings.node_silent_s
        now = time.monotonic()
        if silent_s <= 0 or now - self._checked < 1.0:
            return
        self._checked = now
        self._newly_owned(now)
        caught_up: dict[int, bool] = {}
        for node_id, d in list(w.nodes.items()):
            if d is None or d.get("source") != "agent" or not d.get("healthy", True):
                continue
            heard = w.node_heard.setdefault(node_id, now)  # (first seen since this worker started)
            if now - heard < silent_s or self.marked.get(node_id) == heard:
                continue
            part = partition_for(d["cluster"], w.settings.partitions)
            if not self.loop.views.owns(d["cluster"], self.loop.owned):
                continue
            if part not in caught_up:
                caught_up[part] = await self._caught_up(part)
            if not caught_up[part]:
                continue
            await self._mark(d, part, now - heard)
            self.marked[node_id] = heard
        self.marked = {n: h for n, h in self.marked.items() if w.node_heard.get(n) == h}

    def _newly_owned(self, now: float) -> None:
        """A partition this worker is given (again) gives its nodes the whole interval: what this worker
        heard of them before it lost the partition says nothing of now (found by the review of the
        change: a partition that came back had its nodes marked at once), and what it handled there
        then is not where it stands now."""
        w, owned = self.loop.w, set(self.loop.owned)
        # owned since the last pass, or given again since (it left and came back between two passes: found
        # by review, what this worker heard before marked its nodes at once); not every partition at every
        # rebalance (the consumer revokes them all each time, and keeps what it is given back)
        newly = {p for p in owned if p not in self._owned or w.holds_since.get(p, 0.0) > self._passed}
        self._passed = time.time()
        if newly:
            for node_id, d in list(w.nodes.items()):
                if d is not None and partition_for(d.get("cluster", ""), w.settings.partitions) in newly:
                    w.node_heard[node_id] = now
                    self.marked.pop(node_id, None)
            for part in newly:
                w.telemetry_offsets.pop(part, None)
        self._committed = {p: c for p, c in self._committed.items() if p in owned and p not in newly}
        self._owned = owned

    async def _caught_up(self, partition: int) -> bool:
        """Has this worker's group handled ``partition`` of ``nodes.telemetry`` up to the end its consumer
        knows? By the offset this worker handled there, or, before it handled any since it was given
        the partition, by the group's committed offset (a worker restarted when its agents had already
        died reads nothing more there: found by the review of the change, it then never marked)."""
        w = self.loop.w
        tp = TopicPartition(w.settings.topic("nodes.telemetry"), partition)
        try:
            end = w.app.consumer.highwater(tp)
        except Exception:  # noqa: BLE001 - not assigned (a rebalance under way), no consumer yet: not now
            return False
        if end is None:
            return False
        if partition in w.telemetry_offsets:
            return w.telemetry_offsets[partition] >= end - 1
        committed = self._committed.get(partition)
        if committed is None:
            committed = await self._committed_offset(tp)
            if committed is not None and partition in self.loop.owned:
                self._committed[partition] = committed
        return committed is not None and committed >= end

    async def _committed_offset(self, tp: TopicPartition) -> int | None:
        """The worker group's committed offset on ``tp`` (None when it has none or the broker does not say)."""
        from streams.offset_starts import committed_offsets

        w = self.loop.w
        try:
            return (await committed_offsets(w.settings, w.app.conf.id, [tp])).get(tp)
        except Exception as e:  # noqa: BLE001 - the next pass asks again
            log.debug("silent nodes: no committed offset for %s: %s", tp, e)
            return None

    async def _mark(self, d: dict[str, Any], partition: int, quiet_s: float) -> None:
        last = NodeTelemetry.model_validate(d)
        report = last.model_copy(update={
            "event_id": new_event_id(), "event_time": last.event_time + timedelta(milliseconds=1),
            "source": "worker", "healthy": False})  # fmt: skip
        refused = self.loop.w.node_refused.get(last.node_id)
        log.warning("node %s (cluster %s): no report from its agent applied for %.0f s (SEMSCHED_NODE_SILENT=%g)%s: "
                    "marked unhealthy", last.node_id, last.cluster, quiet_s, self.loop.w.settings.node_silent_s,
                    f"; its latest were refused: {refused}" if refused else "")  # fmt: skip
        self.loop.w.counters.nodes_silent += 1
        send = self.loop._send  # the loop's one way to the producer
        await (await send("nodes.telemetry", last.node_id, report.to_bytes(), partition))

