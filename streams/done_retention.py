"""The done table keeps a finished or rejected job for ``SEMSCHED_DONE_RETENTION`` (168 h, the
topics' retention; 0: for ever), then forgets it.

The done table answers three questions: is a submission read again one already handled (its
event id), did a DAG child's parents finish, and how many of a gang's members finished. Kept for
ever, it grew by a record a job (with its parsed copy, 1.7 KB in memory, and its changelog):
a worker placing a million jobs a week held gigabytes after a month, and a restart read them
all back from the changelog.

A record is forgotten once this worker has held it for the retention: counted from when the
worker wrote it, or, for records it recovered from the changelog (a restart, a rebalance), from
when it first saw them. Only a partition the worker owns is swept, and each deletion goes to the
changelog like any other write, so another owner of the partition forgets the same records.

What a forgotten record no longer does:

- a submission with its job id is taken as a new job (the submission topic's own retention is
  the same 168 h, so a redelivered one cannot come from there);
- a DAG child whose parent finished longer ago waits for it as for one never submitted, and is
  rejected after ``SEMSCHED_DAG_PARENT_WAIT``;
- a gang member that finished no longer counts toward its gang (a gang whose members finished a
  retention apart is not one a scheduler keeps together); a gang with a rejected member stays
  rejected (one entry a gang, kept).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scheduling.events import partition_for
from streams.state import Transition

if TYPE_CHECKING:
    from streams.loop import SchedulingLoop

log = logging.getLogger("semsched.worker")

CHECK_EVERY_S = 10.0
MAX_PER_PASS = 5_000  # deletions a pass: the changelog sends stay a small part of a tick


class DoneRetention:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self.scanned = False  # the recovered table's records given a time (after each rebalance again)
        self.forgotten = 0
        self._checked = -float("inf")

    def rescan(self) -> None:
        """The done table was recovered or its partitions changed: the next pass reads it whole."""
        self.scanned = False

    async def check(self) -> int:
        """Forget the records held longer than the retention, at most once every ``CHECK_EVERY_S``;
        returns how many this pass forgot."""
        w, retention = self.loop.w, self.loop.w.settings.done_retention_s
        now = time.time()
        if retention <= 0 or time.monotonic() - self._checked < CHECK_EVERY_S:
            return 0
        self._checked = time.monotonic()
        if not self.scanned:  # (records written by Faust's recovery, not by Worker.apply)
            for key in [k for k, d in list(w.done.items()) if d is not None and k not in w.done_since]:
                w.done_since[key] = now
            self.scanned = True
        expired = []
        for key, since in w.done_since.items():  # oldest first
            if since > now - retention or len(expired) >= MAX_PER_PASS:
                break
            expired.append(key)
        forgotten = 0
        for key in expired:
            d = w.done.get(key)
            cluster = (d or {}).get("cluster")
            if d is None or not cluster or not self.loop.views.owns(cluster, self.loop.deciding()):
                # gone, a record from before done records named their cluster (its partition is not known:
                # kept), or a partition another worker owns now (its owner forgets it): not this worker's
                w.done_since.pop(key, None)
                continue
            w.apply(Transition(done={key: None}), partition=partition_for(cluster, w.settings.partitions))
            if d.get("gang_id"):
                w.forget_gang_member(d)
            forgotten += 1
        self.forgotten += forgotten
        if forgotten:
            log.info("done table: forgot %d job(s) held longer than %g s (SEMSCHED_DONE_RETENTION)", forgotten,
                     retention)  # fmt: skip
        return forgotten
