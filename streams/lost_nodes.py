"""Jobs on a node that reports itself unhealthy (or that the worker marked so: its agent fell silent,
:mod:`streams.silent_nodes`) are moved off it.

An agent reports how a job ends, but a node whose telemetry says ``healthy: false`` (a GPU fell
off the bus, the node is being drained, its kubelet is not ready) may never report the jobs on it
again. Once a node has been unhealthy for ``settings.node_lost_s`` (``SEMSCHED_NODE_LOST``, 60 s;
0: at once; below 0: never), the worker preempts each placement on it — running or still
reserved: a fence to the node (its agent, if alive, stops the run) and a ``preempted`` lifecycle
event, which re-queues the job without using up its retries (the node failed, not the job; a
gang's other members follow, as for any preemption). Each placement once, when the broker has
both; the clock starts when this worker first sees the node unhealthy (a restarted worker waits
the grace again). Until then the filters only keep new placements off the node.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from scheduling.events import JobLifecycle, PreemptCommand, node_lost_reason, partition_for
from streams.state import RunningJob

if TYPE_CHECKING:
    from streams.loop import SchedulingLoop


class LostNodes:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self.unhealthy_since: dict[str, float] = {}  # node id -> when this worker first saw it unhealthy
        self.preempted: set[str] = set()  # decision ids already moved off their node
        self._checked = 0.0

    async def check(self) -> None:
        """One pass over the nodes and the running table, at most once a second."""
        w = self.loop.w
        grace = w.settings.node_lost_s
        now, checked = time.time(), time.monotonic()
        if grace < 0 or checked - self._checked < 1.0:
            return
        self._checked = checked
        unhealthy = {node_id for node_id, d in list(w.nodes.items()) if d is not None and not d.get("healthy", True)}
        self.unhealthy_since = {n: self.unhealthy_since.get(n, now) for n in unhealthy}
        if not unhealthy:
            self.preempted.clear()
            return
        placed = set()
        for d in list(w.running.values()):
            if d is None:
                continue
            placed.add(d["decision_id"])
            since = self.unhealthy_since.get(d["node_id"])
            if since is None or now - since < grace or d["decision_id"] in self.preempted:
                continue
            r = RunningJob.model_validate(d)
            if not self.loop.views.owns(r.job.cluster, self.loop.owned):
                continue
            how = "reported"
            if (w.nodes.get(r.node_id) or {}).get("source") == "worker":
                refused = w.node_refused.get(r.node_id)  # (its agent reports, with a clock this worker refuses)
                how = (f"silent (its agent's reports were refused: {refused}), marked" if refused
                       else "silent (no report from its agent), marked")  # fmt: skip
            await self._preempt(r, node_lost_reason(r.node_id, how, now - since, grace))
            self.preempted.add(r.decision_id)  # only once the broker has both: else again at the next pass
        self.preempted &= placed

    async def _preempt(self, r: RunningJob, reason: str) -> None:
        part = partition_for(r.job.cluster, self.loop.w.settings.partitions)
        fence = PreemptCommand(decision_id=f"lost-{r.decision_id}", job_id=r.job.job_id, cluster=r.job.cluster,
                               node_id=r.node_id, target_decision_id=r.decision_id, reason=reason)  # fmt: skip
        ev = JobLifecycle(job_id=r.job.job_id, cluster=r.job.cluster, state="preempted", attempt=r.attempt,
                          decision_id=r.decision_id, node_id=r.node_id, reason=reason)  # fmt: skip
        send = self.loop._send  # the loop's one way to the producer
        await (await send("actions", fence.node_id, fence.to_bytes(), part))  # first: a live run stops
        await (await send("jobs.lifecycle", ev.job_id, ev.to_bytes(), part))
