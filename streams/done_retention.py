"""Done jobs are forgotten a while after they end, as Kubernetes' TTL-after-finished controller deletes
finished Jobs: the ``done`` table (held in memory, and its changelog, which a restarted worker reads
whole) stays bounded in a worker that runs for months.

A done record carries when it became done (``DoneJob.done_ts``, stamped by ``Worker.apply``).
``settings.done_retention_s`` (``SEMSCHED_DONE_RETENTION``, 7 days; 0: kept for ever) plus
``SEMSCHED_MAX_CLOCK_SKEW`` after that, the scheduling loop deletes it: from the store, and a
tombstone on its cluster's changelog partition.

- Not while a job still pending or running needs it: a DAG parent of one (the DAG gate reads its
  status), or a member of a gang with a member still to run (it counts toward the gang, or took it
  down). Those are looked at again every ``PASS_EVERY_S``.
- Only in the partitions the loop may decide on: the tables also hold standby replicas, which their
  owner's tombstones clear.
- A record written before ``done_ts`` was kept is stamped at a pass, and forgotten a retention later.
- Up to ``MAX_PER_PASS`` records a pass; a pass every ``PASS_EVERY_S`` (a tenth of the retention when
  that is shorter), at every tick while more are due.

**No forgotten job runs twice.** Before deleting, the loop raises its partition's *forgotten
watermark* (the ``forgotten`` table, changelogged, partition → epoch s) to the latest ``done_ts`` it
forgets plus the clock skew, and waits for the broker to have it. A submission the worker does not
know whose Kafka record was sent at or before its partition's watermark may be a forgotten job's
(read again after a crash, by the restore's read-back window, by a group whose committed offsets
expired): it is refused, dead-lettered live (:func:`refusal`) and not restored from the logs. A
submission is sent before its job ends, and a record whose sender's clock was more than the skew
ahead is refused too, so every forgotten job's submission is at or before the watermark. The
watermark stays whatever the setting later says (raised, or 0), so changing it re-runs nothing.
A lifecycle report of a job the worker does not know, sent at or before the watermark, is let go
(counted in ``notes``): held as an early report, it would wait for a submission that is refused, then
fence a run long over. The argument takes the workers' clocks to agree within the skew.
The cost: a submission that waited in its topic since before the jobs forgotten last ended (every
worker down for longer than the retention) is dead-lettered, not run; sending it again runs it.

A forgotten job is one never seen: a new submission of its id is a new job (within the retention it
is dead-lettered as a re-used id), and a DAG child submitted after its parent was forgotten waits for
the parent as for one never submitted (``SEMSCHED_DAG_PARENT_WAIT``).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from scheduling.events import partition_for
from streams.admission import ahead_of_clock
from streams.state import DoneJob, Transition

if TYPE_CHECKING:
    from streams.app import Worker
    from streams.loop import SchedulingLoop

log = logging.getLogger("semsched.worker")

PASS_EVERY_S = 60.0
MAX_PER_PASS = 2000
WATERMARK_WAIT_S = 10.0  # for the broker to have a raised watermark before the records go (the tick waits)


def sent_at(timestamp_ms: int | None, event_time: datetime) -> float:
    """When an input record was sent (epoch s): its Kafka timestamp, else (none, or a sentinel) its event's time."""
    return timestamp_ms / 1000 if timestamp_ms is not None and timestamp_ms > 0 else event_time.timestamp()


def of_a_forgotten_job(w: Worker, partition: int, sent: float) -> bool:
    """Whether an event of a job this worker does not know, on ``partition``, sent at ``sent``, may be of a
    job done and forgotten since: sent at or before the partition's watermark."""
    mark = w.forgotten.get(str(partition))
    return mark is not None and sent <= mark


def refusal(w: Worker, partition: int, timestamp_ms: int | None, event_time: datetime) -> str | None:
    """Why a submission of a job this worker does not know, on ``partition``, whose Kafka record was sent
    at ``timestamp_ms`` (``event_time`` when the record has none), is refused; None when it is not."""
    sent = sent_at(timestamp_ms, event_time)
    record = datetime.fromtimestamp(sent, UTC)
    if reason := ahead_of_clock(record, w.settings.max_clock_skew_s, what="its Kafka record's timestamp"):
        return reason
    if not of_a_forgotten_job(w, partition, sent):
        return None
    return (f"sent at {_iso(sent)}, before {_iso(w.forgotten.get(str(partition)))}, up to which this partition's "
            "done jobs were forgotten (SEMSCHED_DONE_RETENTION): it may be one of theirs, read again; send it "
            "again to run it")  # fmt: skip


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


class DoneRetention:
    def __init__(self, loop: SchedulingLoop) -> None:
        self.loop = loop
        self._next = -1e18  # when the next pass is due (monotonic)
        self._needed: list[tuple[float, str]] = []  # due, but a pending or running job needed them
        self._needed_checked = -1e18  # when they were last looked at (monotonic)
        self._unstamped: list[str] = []  # records without done_ts found by the last scan
        # per partition, the watermark the broker acknowledged to this process (a new process sends its
        # partitions' watermarks once again at its first pass: one message each)
        self._acked: dict[int, float] = {}

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

    async def sweep(self) -> int:
        """One pass, when one is due: forget what is past the retention; how many were forgotten."""
        w = self.loop.w
        keep = w.settings.done_retention_s
        now_m = time.monotonic()
        if keep <= 0 or now_m < self._next:
            return 0
        every = min(PASS_EVERY_S, keep / 10)
        self._next = now_m + every
        now = time.time()
        self._stamp(now)
        until = now - keep - w.settings.max_clock_skew_s
        due: list[tuple[float, str]] = []
        while w.done_due and w.done_due[0][0] <= until and len(due) < MAX_PER_PASS:
            due.append(heapq.heappop(w.done_due))
        if w.done_due and w.done_due[0][0] <= until:
            self._next = now_m  # more are due: the next tick goes on
        if now_m - self._needed_checked >= every:
            due, self._needed, self._needed_checked = due + self._needed, [], now_m
        going = self._going(due)
        if not going:
            return 0
        if not await self._raise_watermarks(going):
            for entries in going.values():  # (kept for a later pass)
                for entry in entries:
                    heapq.heappush(w.done_due, entry)
            self._next = now_m + every
            return 0
        # again: while the watermark was on its way, a partition may have been revoked, a job needing
        # one of them (a DAG child, a gang member) accepted, or a record written again
        going = self._going([entry for entries in going.values() for entry in entries])
        forgotten = 0
        for part, entries in going.items():
            if self._acked.get(part, 0.0) < max(ts for ts, _ in entries) + w.settings.max_clock_skew_s:
                for entry in entries:  # (the skew changed under the wait: the next pass raises it again)
                    heapq.heappush(w.done_due, entry)
                continue
            w.apply(Transition(done=dict.fromkeys((key for _, key in entries), None)), partition=part)
            forgotten += len(entries)
        w.counters.done_forgotten += forgotten
        if forgotten:
            log.info("forgot %d done job(s) ended more than %g s ago (SEMSCHED_DONE_RETENTION); %d kept for "
                     "jobs still to run", forgotten, keep, len(self._needed))  # fmt: skip
        return forgotten

    def _going(self, due: list[tuple[float, str]]) -> dict[int, list[tuple[float, str]]]:
        """Of ``due``, per partition, the records to forget now; those a job still to run needs go to
        ``_needed``, those deleted or written again since, or of partitions the loop may not decide on, are
        dropped (a record done again has its own entry; another partition's owner forgets its own)."""
        w = self.loop.w
        parents, open_gangs = self._needs() if due else (set(), set())
        deciding = self.loop.deciding()
        going: dict[int, list[tuple[float, str]]] = defaultdict(list)
        for ts, key in due:
            d = w.done.get(key)
            if d is None or d.get("done_ts") != ts:
                continue
            cluster = d.get("cluster") or ""
            if not cluster or not self.loop.views.owns(cluster, deciding):
                continue  # (one without a cluster: its partition is unknown, so it is kept)
            if key in parents or (d.get("gang_id") and (cluster, d["gang_id"]) in open_gangs):
                self._needed.append((ts, key))
                continue
            going[partition_for(cluster, w.settings.partitions)].append((ts, key))
        return going

    async def _raise_watermarks(self, going: dict[int, list[tuple[float, str]]]) -> bool:
        """Each partition's watermark past what it forgets, acknowledged by the broker before any record goes
        (``_acked``: what the broker has; the table's own value, which :func:`refusal` reads, may run
        ahead of it). False if the broker did not take them within ``WATERMARK_WAIT_S``."""
        w = self.loop.w
        sent: dict[int, tuple[float, Any]] = {}
        for part, entries in going.items():
            mark = max(ts for ts, _ in entries) + w.settings.max_clock_skew_s
            if self._acked.get(part, 0.0) >= mark:
                continue
            key = str(part)
            w.forgotten.data[key] = max(mark, w.forgotten.get(key) or 0.0)  # (refusing from now on)
            sent[part] = (w.forgotten.data[key], w.forgotten.send_changelog(part, key, w.forgotten.data[key]))
        waits = [f for _, f in sent.values() if isinstance(f, asyncio.Future)]
        if waits:  # (asyncio.wait, not wait_for: a cancelled Faust future would break its own callback)
            await asyncio.wait(waits, timeout=WATERMARK_WAIT_S)
        failed = [f for f in waits if not f.done() or f.cancelled() or f.exception() is not None]
        if failed:  # (the broker away: nothing is forgotten until it takes the watermark)
            why = "no answer" if not failed[0].done() or failed[0].cancelled() else repr(failed[0].exception())
            log.warning("the forgotten watermark did not reach the broker within %g s (%s): done jobs kept until "
                        "it does", WATERMARK_WAIT_S, why)  # fmt: skip
            return False
        for part, (mark, _) in sent.items():
            self._acked[part] = max(mark, self._acked.get(part, 0.0))
        return True

    def _stamp(self, now: float) -> None:
        """Give records written before ``done_ts`` was kept one (at most MAX_PER_PASS a pass), in the
        partitions the loop may decide on."""
        w, later, stamped = self.loop.w, [], 0
        for i, key in enumerate(self._unstamped):
            if stamped >= MAX_PER_PASS:
                later.extend(self._unstamped[i:])
                break
            d = w.done.get(key)
            if d is None or d.get("done_ts"):
                continue
            cluster = d.get("cluster") or ""
            if not cluster:  # (older still: its changelog partition is unknown, so it is kept)
                continue
            if not self.loop.views.owns(cluster, self.loop.deciding()):
                later.append(key)  # (its partition may be given to this worker later)
                continue
            try:
                record = DoneJob.model_validate(d).model_copy(update={"done_ts": now})
            except ValidationError as e:
                log.error("done record %r is not one (%s): kept as it is", key, e.errors()[0]["msg"])
                continue
            w.apply(Transition(done={key: record}), partition=partition_for(cluster, w.settings.partitions))
            stamped += 1
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
