"""Lifecycle reports that overtake their job's submission.

The worker consumes its input topics side by side, with no order between them. After a restart
or a rebalance, the backlog of ``jobs.submitted`` can be far longer than that of
``jobs.lifecycle``: an agent's ``started`` and ``finished`` for a job the previous worker placed
then come while this worker has not read the job's submission yet. Handled then, they found no
such job: the ``started`` was fenced as a superseded placement though it was the current one, the
``finished`` was dropped, and once the submission and the decision came the reservation timed
out and the job ran a second time (``tests/integration/test_worker_restart.py``).

Such a report waits here until the job's submission is applied (then it is handled, in the order
the reports came), or for ``max_age_s`` (then it is handled as before: a report about a placement
this worker never knew). Waiting reports live in memory and their offsets are committed; a worker
that dies holding some reads them back with the log restore, which applies submissions first
(``streams/log_restore.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.events import JobLifecycle


@dataclass(frozen=True)
class EarlyReport:
    event: JobLifecycle
    partition: int
    since: float  # when it came (wall clock)
    offset: int = -1  # where it came from, and its bytes (for its dead letter, if handling it fails)
    raw: bytes | None = None
    timestamp: float | None = None  # its Kafka record's timestamp in s, as Faust gives it (the same)

    @property
    def key(self) -> bytes:
        return self.event.job_id.encode()


class EarlyReports:
    def __init__(self, max_age_s: float, limit: int = 100_000) -> None:
        self.max_age_s = max_age_s
        self.limit = limit  # beyond it a report is handled at once (memory stays bounded)
        self._by_job: dict[str, list[EarlyReport]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def hold(self, event: JobLifecycle, partition: int, now: float, offset: int = -1, raw: bytes | None = None,
             timestamp: float | None = None) -> bool:  # fmt: skip
        """Keep ``event`` for its job; False when full (handle it now)."""
        if self._count >= self.limit:
            return False
        self._by_job.setdefault(event.job_id, []).append(EarlyReport(event, partition, now, offset, raw, timestamp))
        self._count += 1
        return True

    def take(self, job_id: str) -> list[EarlyReport]:
        """The reports held for ``job_id``, in the order they came (now its submission is applied)."""
        reports = self._by_job.pop(job_id, [])
        self._count -= len(reports)
        return reports

    def keep_partitions(self, partitions: set[int]) -> int:
        """Let go of the reports of every partition but ``partitions`` (the assignment: those that went
        are their new owner's, who reads them back with its log restore); how many went. Found by review:
        kept, they expired here later, and a ``started`` of a job this worker never learnt of fenced the run
        the new owner had placed. (Not at revocation: a rebalance revokes every partition, also those
        that come straight back, whose held reports nothing would read back.)"""
        dropped = 0
        for job in list(self._by_job):
            kept = [r for r in self._by_job[job] if r.partition in partitions]
            dropped += len(self._by_job[job]) - len(kept)
            if kept:
                self._by_job[job] = kept
            else:
                del self._by_job[job]
        self._count -= dropped
        return dropped

    def expired(self, now: float, partitions: set[int] | None = None) -> list[EarlyReport]:
        """The reports of every job whose first report has waited ``max_age_s`` (with ``partitions``: of
        those partitions only; the others wait, for the next assignment to keep or let them go)."""
        old = [job for job, reports in self._by_job.items() if now - reports[0].since >= self.max_age_s
               and (partitions is None or reports[0].partition in partitions)]  # fmt: skip
        return [r for job in old for r in self.take(job)]
