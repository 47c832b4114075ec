"""What the scheduling loop reads from the worker's tables, as the scheduling core wants it:
node views, pending requests and what holds resources, per cluster, for the clusters this
worker owns. Each record is converted once and cached while it is unchanged."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

from scheduling.events import NodeTelemetry, partition_for
from scheduling.job import JobRequest
from scheduling.node import NodeView
from streams.held_ledger import Holding, identity_of
from streams.state import PendingJob, RunningJob

if TYPE_CHECKING:
    from streams.app import Worker


class TableViews:
    def __init__(self, w: Worker) -> None:
        self.w = w
        self._nodes: dict[str, tuple[str, NodeView]] = {}
        self._jobs: dict[tuple[str, int], tuple[PendingJob, JobRequest]] = {}
        self._held: dict[tuple[object, ...], Holding] = {}

    def owns(self, cluster: str, owned: set[int]) -> bool:
        return partition_for(cluster, self.w.settings.partitions) in owned

    def nodes(self, owned: set[int]) -> dict[str, list[NodeView]]:
        by_cluster: dict[str, list[NodeView]] = defaultdict(list)
        for node_id, d in list(self.w.nodes.items()):
            if d is None:
                continue
            cached = self._nodes.get(node_id)
            if cached is None or cached[0] != d["event_id"]:
                t = NodeTelemetry.model_validate(d)
                view = NodeView(node_id=t.node_id, cluster=t.cluster, cpu_milli=t.cpu_milli,
                                memory_mib=t.memory_mib, num_gpu=t.num_gpu, gpu_model=t.gpu_model,
                                healthy=t.healthy, topology=t.topology)  # fmt: skip
                cached = (d["event_id"], view)
                self._nodes[node_id] = cached
            if self.owns(cached[1].cluster, owned):
                by_cluster[cached[1].cluster].append(cached[1])
        for views in by_cluster.values():
            # by node id: the order the archive's replays rebuild, whose features read it (FGD's first tie, the
            # lowest-index tie-break), and the same after a changelog restore (found by review: the table's
            # insertion order, which a restore replays in another order)
            views.sort(key=_node_id)
        return by_cluster

    def pending(self, owned: set[int]) -> dict[str, list[tuple[PendingJob, JobRequest]]]:
        """Queued jobs not being decided right now (in flight)."""
        by_cluster: dict[str, list[tuple[PendingJob, JobRequest]]] = defaultdict(list)
        for job_id, d in list(self.w.pending.items()):
            if d is None or job_id in self.w.inflight:
                continue
            key = (job_id, d["attempt"])
            cached = self._jobs.get(key)
            if cached is None:
                p = PendingJob.model_validate(d)
                cached = (p, replace(JobRequest.from_event(p.job, submit_time=p.submit_ts), attempt=p.attempt))
                self._jobs[key] = cached
            if self.owns(cached[0].job.cluster, owned):
                by_cluster[cached[0].job.cluster].append(cached)
        return by_cluster

    def holding(self, job_id: str) -> Holding | None:
        """What ``running[job_id]`` holds (the ledger's reading of a row, streams/held_ledger.py)."""
        r = self.w.read("running", job_id, RunningJob)
        return None if r is None else _holding(r)

    def inflight(self, cluster: str) -> list[Holding]:
        """The placements of ``cluster`` being published (acknowledged and applied within the step)."""
        return [(rec.node_id, req, list(rec.gpu_indices)) for rec, req in list(self.w.inflight.values())
                if rec.outcome == "placed" and rec.node_id and req is not None and req.cluster == cluster]  # fmt: skip

    def holdings(self, owned: set[int]) -> list[Holding]:
        """What placed jobs hold, read from the whole ``running`` table. The scheduling loop keeps
        this instead (streams/snapshot_cache.py) and reads it whole only to check what it keeps."""
        out: list[Holding] = []
        seen = set()
        for d in list(self.w.running.values()):
            if d is None:
                continue
            key = identity_of(d)
            seen.add(key)
            held = self._held.get(key)
            if held is None:
                held = _holding(RunningJob.model_validate(d))
                self._held[key] = held
            if self.owns(held[1].cluster, owned):
                out.append(held)
        for key in [k for k in self._held if k not in seen]:
            del self._held[key]
        return out

    def forget_left_jobs(self) -> set[str]:
        """Drop cached requests of jobs that left the queue; returns the queued job ids."""
        live = {(j, d["attempt"]) for j, d in list(self.w.pending.items()) if d is not None}
        for key in [k for k in self._jobs if k not in live]:
            del self._jobs[key]
        return {j for j, _ in live}


def _holding(r: RunningJob) -> Holding:
    return r.node_id, JobRequest.from_event(r.job), r.gpu_indices


def _node_id(view: NodeView) -> str:
    return view.node_id
