"""Done jobs are forgotten a while after they end, as Kubernetes' TTL-after-finished controller deletes
finished Jobs: the ``done`` table (held in memory, and its changelog, which a restarted worker reads
whole) stays bounded in a worker that runs for months.

A done record carries when it became done (``DoneJob.done_ts``, stamped by ``Worker.apply``).
``settings.done_retention_s`` (``SEMSCHED_DONE_RETENTION``, 7 days; 0: kept for ever) after that, the
scheduling loop deletes it: from the store, and a tombstone on its cluster's changelog partition.

- A submission whose record was sent (its Kafka timestamp) more than the retention ago is refused
  (:func:`sent_too_long_ago`): dead-lettered live, skipped by the restore from the input logs. A
  submission is sent before its job ends, and a record is forgotten only the retention plus
  ``SEMSCHED_MAX_CLOCK_SKEW`` after its job ended, so a forgotten job's submission read again (after
  a crash, the restore's read-back window, a group whose committed offsets expired) is always
  refused, never taken for a new job and placed twice (producers' clocks within that skew).
  Kafka's default topic retention is 7 days too: a submission that old is about to be deleted.
- Not while a job still pending or running needs it: a DAG parent of one (the DAG gate reads its
  status), or a member of a gang with a member still to run (it counts toward the gang, or took
  it down).
- Only in the partitions this worker owns: the tables also hold standby replicas, which their
  owner's tombstones clear.
- A record written before ``done_ts`` was kept is stamped at the first pass over it, and forgotten
  the retention after that.
- At most ``MAX_PER_PASS`` records a pass, a pass at most every ``PASS_EVERY_S`` (a tenth of the
  retention when that is shorter): ~2.9 million a day, each pass a few milliseconds of the loop.

A forgotten job is one this worker never saw: a submission that uses its id again is a new job
(within the retention it is dead-lettered as a re-used id), and a DAG child submitted after its
parent was forgotten waits for the parent as for one never submitted (``SEMSCHED_DAG_PARENT_WAIT``).
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import TYPE_CHECKING

from scheduling.events import partition_for
from streams.settings import Settings
from streams.state import DoneJob, Transition

if TYPE_CHECKING:
    from streams.loop import SchedulingLoop

log = logging.getLogger("semsched.worker")

PASS_EVERY_S = 60.0
MAX_PER_PASS = 2000


def sent_too_long_ago(timestamp_ms: int | None, s: Settings, now: float | None = None) -> str | None:
    """Why a submission whose record was sent at ``timestamp_ms`` (its Kafka timestamp) is refused: more
    than ``SEMSCHED_DONE_RETENTION`` ago, so its job may have been done and forgotten since; None if not."""
    keep = s.done_retention_s
    if keep <= 0 or timestamp_ms is None:
        return None
    age = (time.time() if now is None else now) - timestamp_ms / 1000
    if age <= keep:
        return None
    return (f"submission sent {age:,.0f} s ago, more than SEMSCHED_DONE_RETENTION={keep:g} s: its job may have "
            "been done and forgotten since; submit it again (a new event) to run it")


class DoneRetention:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self._passed = -1e18  # when the last pass ran (monotonic)
        self._needed: list[tuple[float, str]] = []  # due, but a pending or running job needed them: next pass
        self._unstamped: list[str] = []  # records without done_ts found by the last scan

    def rescan(self) -> None:
        """Index the done table again (after a recovery or a rebalance: Faust's recovery writes the
        table without ``Worker.apply``, which indexes what this worker writes)."""
        w = self.loop.w
        due, self._unstamped, self._needed = [], [], []
        for key, d in list(w.done.items()):
            if d is None:
                continue
            if d.get("done_ts"):
                due.append((float(d["done_ts"]), key))
            else:
                self._unstamped.append(key)
        heapq.heapify(due)
        w.done_due = due

    def sweep(self) -> int:
        """One pass (when one is due): forget what is past the retention; how many were forgotten."""
        w = self.loop.w
        keep = w.settings.done_retention_s
        now_m = time.monotonic()
        if keep <= 0 or now_m - self._passed < min(PASS_EVERY_S, keep / 10):
            return 0
        self._passed = now_m
        now = time.time()
        self._stamp(now)
        due, self._needed = self._needed, []
        until = now - keep - w.settings.max_clock_skew_s  # (see sent_too_long_ago)
        while w.done_due and w.done_due[0][0] <= until and len(due) < MAX_PER_PASS:
            due.append(heapq.heappop(w.done_due))
        if not due:
            return 0
        parents, open_gangs = self._needs()
        forgotten = 0
        for ts, key in due:
            d = w.done.get(key)
            if d is None or d.get("done_ts") != ts:  # deleted, or done again since (its own entry is due later)
                continue
            cluster = d.get("cluster") or ""
            if not cluster or not self.loop.views.owns(cluster, self.loop.owned):
                continue  # its partition's owner forgets it (one without a cluster: its partition is unknown, kept)
            if key in parents or (d.get("gang_id") and (cluster, d["gang_id"]) in open_gangs):
                self._needed.append((ts, key))
                continue
            w.apply(Transition(done={key: None}), partition=partition_for(cluster, w.settings.partitions))
            forgotten += 1
        w.counters.done_forgotten += forgotten
        if forgotten:
            log.info("forgot %d done job(s) ended more than %g s ago (SEMSCHED_DONE_RETENTION); %d kept for "
                     "jobs still to run", forgotten, keep, len(self._needed))  # fmt: skip
        return forgotten

    def _stamp(self, now: float) -> None:
        """Give the records written before ``done_ts`` was kept one, in the partitions this worker owns."""
        w, later = self.loop.w, []
        for key in self._unstamped:
            d = w.done.get(key)
            if d is None or d.get("done_ts"):
                continue
            cluster = d.get("cluster") or ""
            if not cluster:  # (older still: its changelog partition is unknown, so it is kept)
                continue
            if not self.loop.views.owns(cluster, self.loop.owned):
                later.append(key)  # (its partition may be given to this worker later)
                continue
            stamped = DoneJob.model_validate(d).model_copy(update={"done_ts": now})
            w.apply(Transition(done={key: stamped}), partition=partition_for(cluster, w.settings.partitions))
        self._unstamped = later

    def _needs(self) -> tuple[set[str], set[tuple[str, str]]]:
        """The DAG parents of the jobs pending or running, and their gangs ((cluster, gang id))."""
        w = self.loop.w
        parents: set[str] = set()
        gangs: set[tuple[str, str]] = set()
        for table in (w.pending, w.running):
            for d in list(table.values()):
                if d is None:
                    continue
                job = d["job"]
                parents.update(job.get("dag_parents") or ())
                if job.get("gang_id"):
                    gangs.add((job.get("cluster") or "", job["gang_id"]))
        return parents, gangs
