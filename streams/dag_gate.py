"""Which pending jobs a step may place: the gate in front of the policy.

A job goes on when its DAG parents have all finished. Otherwise it waits (a parent still to come or
to finish) or is rejected, because it never can run:

- a DAG parent was rejected;
- a DAG parent was never submitted ``dag_parent_wait_s`` (``SEMSCHED_DAG_PARENT_WAIT``) after the job
  was queued, or after this worker started or was given the job's partition if later (a restart's or a
  rebalance's backlog may still hold the parent); a parent done and forgotten since
  (``SEMSCHED_DONE_RETENTION``: :mod:`streams.done_retention`) is one never submitted;
- its DAG parents wait on each other in a cycle (``a`` waits for ``b``, which waits for ``a``), or
  wait on such a cycle: none of them can ever start;
- a member of its gang was rejected, so the gang can never run whole.

A gang's members that finished count toward it (as Volcano counts succeeded pods toward a gang's
minimum): the rest is placed together without them. Only members done since the job's submission
count: a gang id submitted again after its gang was over names a new gang.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduling.events import name_some, partition_for
from scheduling.job import JobRequest
from scheduling.parent_cycles import waiting_on_a_cycle
from streams.state import PendingJob

if TYPE_CHECKING:
    from streams.app import Worker

#: (job, why it is held, whether that is for good: rejected, not waiting)
Held = tuple[PendingJob, str, bool]


def dag_gate(w: Worker, jobs: Sequence[tuple[PendingJob, JobRequest]]
             ) -> tuple[list[tuple[PendingJob, JobRequest]], list[Held]]:  # fmt: skip
    """``(ready, held)`` of one cluster's pending ``jobs`` (module docstring)."""
    ready, held = [], []
    now, patience = time.time(), w.settings.dag_parent_wait_s
    stuck = waiting_on_a_cycle({p.job.job_id: p.job.dag_parents for p, _ in jobs if p.job.dag_parents})
    for p, req in jobs:
        rejected, finished = w.gang_state(p.job.cluster, p.job.gang_id, p.submit_ts) if p.job.gang_id else (False, 0)
        if rejected:
            held.append((p, f"gang {p.job.gang_id}: another member was rejected", True))
            continue
        if finished:
            req = dataclasses.replace(req, gang_size=max(1, req.gang_size - finished))
        parents = p.job.dag_parents
        if not parents:
            ready.append((p, req))
            continue
        if (cycle := stuck.get(p.job.job_id)) is not None:
            held.append((p, f"its DAG parents wait on a cycle ({name_some(cycle, ' -> ')}): none of them can ever start",
                         True))  # fmt: skip
            continue
        verdict = _parents_verdict(w, p, parents, now, patience)
        if verdict is None:
            ready.append((p, req))
        else:
            held.append(verdict)
    return ready, held


def _parents_verdict(w: Worker, p: PendingJob, parents: list[str], now: float, patience: float) -> Held | None:
    status = {q: (w.done.get(q) or {}).get("status") for q in parents}
    failed = sorted(q for q, st in status.items() if st == "rejected")
    waiting = sorted(q for q, st in status.items() if st != "finished")
    unknown = [q for q in waiting if status[q] is None and w.pending.get(q) is None and w.running.get(q) is None]
    if failed:
        return p, f"DAG parent(s) {name_some(failed)} were rejected", True
    # the worker's clock, not the producer's, and from no earlier than this worker's start: after a long
    # downtime a parent may still be in the submissions' backlog (found by review: such a child was
    # rejected at once, its wait counted from before the downtime)
    # (and from when this worker was given the job's partition: a partition given to a long-running worker
    # brings a backlog of its own; found by review)
    since = max(p.queued_ts, w.started_at, w.holds_since.get(partition_for(p.job.cluster, w.settings.partitions), 0.0))
    if unknown and patience > 0 and now - since > patience:
        return p, (f"DAG parent(s) {name_some(unknown)} never submitted to cluster {p.job.cluster!r} "
                   f"within {patience:g} s (SEMSCHED_DAG_PARENT_WAIT)"), True  # fmt: skip
    if waiting:
        unseen = (f" ({name_some(unknown)} not submitted yet: rejected {patience:g} s after this job)"
                  if unknown and patience > 0 else "")  # fmt: skip
        return p, f"waiting for DAG parent(s) {name_some(waiting)} to finish{unseen}", False
    return None
