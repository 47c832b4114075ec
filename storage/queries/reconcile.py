"""Reconciliation: jobs the system lost track of, and jobs placed, started or run twice, or run after
they were done.

A job is a cluster and a job id: an id is unique only among the clusters one worker serves (README,
"Ids"), so two clusters on two workers may both have a job "job1" (and, with the same submission event id,
the same decision ids). A job id used again once its first job was forgotten (SEMSCHED_DONE_RETENTION) is
taken for the same job, and shows as placed twice. Every
check groups and joins by cluster too, and names the cluster of each job it reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.events import AGENT_RESTART_LOST_REASON, INTERNAL_ERROR, NODE_LOST_REASON_RE
from storage.client import ArchiveClient
from storage.queries._common import running_jobs

#: a job: (cluster, job_id)
Job = tuple[str, str]
#: an attempt of a job: (cluster, job_id, attempt)
Attempt = tuple[str, str, int]


@dataclass(frozen=True)
class Reconciliation:
    #: (cluster, job_id) submitted and accepted (not dead-lettered), but neither finished, running, nor
    #: rejected with a reason
    unaccounted: list[Job]
    #: (cluster, job_id, attempt) placed more than once: two decision ids or two nodes for one attempt
    placed_twice: list[Attempt]
    #: (cluster, job_id, attempt) with more than one distinct ``started`` event
    started_twice: list[Attempt]
    #: (cluster, job_id, attempt) that started while an earlier attempt of the job ran: a late start of an
    #: attempt the worker had given up on (it fences it), before or during the retry's run
    ran_twice: list[Attempt] = field(default_factory=list)
    #: (cluster, job_id, attempt) that started after the job was done: read after another attempt's
    #: ``finished`` or after the worker's rejection notice (the job ran again once it was over)
    ran_after_done: list[Attempt] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.unaccounted or self.placed_twice or self.started_twice or self.ran_twice
                    or self.ran_after_done)  # fmt: skip


# A submission the worker dead-lettered (a clock too far ahead, a job id in use) is archived like any
# other (the archiver admits on the message alone, streams/admission.py) and its dead letter names
# the message it refused (topic, partition, offset): that one was refused with a reason, not lost.
# Not one dead-lettered for an internal error while it was handled: the worker applies it again
# (streams/log_restore.py), so whether it was lost is what reconciliation must still say.
# The raw rows, not FINAL: FINAL keeps one row per event id, and a copy of the event sent again
# later (and accepted) must not hide behind its dead-lettered twin.
# Every lifecycle report as the worker first read it: one row per event, its earliest position, not
# FINAL's copy archived last (found by review: an agent's report sent again after its send timed out is
# a second message of one event id; FINAL put a `failed` after the retry's start, and the job "ran
# twice"). Refused copies are kept: reconciliation asks what the agents reported, not what the worker
# applied (as 0020's accepted views keep the first copy not refused).
_LIFECYCLE = ("(SELECT * FROM jobs_lifecycle ORDER BY kafka_partition, kafka_offset "
              "LIMIT 1 BY cluster, job_id, event_time, event_id)")

_UNACCOUNTED = """
SELECT DISTINCT cluster, job_id FROM jobs_submitted
WHERE (kafka_partition, kafka_offset) NOT IN
      (SELECT topic_partition, topic_offset FROM deadletter WHERE topic = 'jobs.submitted'
       AND NOT startsWith(reason, '__INTERNAL_ERROR__'))
  AND (cluster, job_id) NOT IN (SELECT cluster, job_id FROM __LIFECYCLE__ WHERE state = 'finished')
  AND (cluster, job_id) NOT IN (SELECT cluster, job_id FROM __LIFECYCLE__
                                WHERE state = 'rejected' AND reason != '')
  AND (cluster, job_id) NOT IN (__RUNNING__)
ORDER BY cluster, job_id
"""
_UNACCOUNTED = _UNACCOUNTED.replace("__RUNNING__", running_jobs("jobs_lifecycle_accepted")).replace(
    "__INTERNAL_ERROR__", INTERNAL_ERROR).replace("__LIFECYCLE__", _LIFECYCLE)

# Not FINAL on purpose: a re-decision of one attempt carries the same event_id (=
# decision_id), so FINAL would collapse two different placements into one row. Raw rows
# include redeliveries, which are identical (same decision id, same node) and so harmless.
_PLACED_TWICE = """
SELECT cluster, job_id, attempt FROM (
    SELECT cluster, job_id, attempt, decision_id, node_id FROM decisions WHERE outcome = 'placed'
    UNION ALL
    SELECT cluster, assumeNotNull(job_id), assumeNotNull(attempt), decision_id, toNullable(toString(node_id))
    FROM actions WHERE kind = 'place'
)
GROUP BY cluster, job_id, attempt
HAVING uniqExact(decision_id) > 1 OR uniqExact(node_id) > 1
ORDER BY cluster, job_id, attempt
"""

_STARTED_TWICE = """
SELECT cluster, job_id, attempt FROM __LIFECYCLE__ WHERE state = 'started'
GROUP BY cluster, job_id, attempt HAVING count() > 1 ORDER BY cluster, job_id, attempt
""".replace("__LIFECYCLE__", _LIFECYCLE)


# Two attempts of one job that ran at once (found by review: the checks above look within one
# attempt, and a job whose timed-out attempt started late on its first node, while its retry ran on
# another, was "reconciled"). An attempt's run lasts from its first `started` to the first `finished`,
# `failed` or `preempted` its agent reported from the node it started on, in the order the worker read
# them (the cluster's lifecycle partition, then the event time); with none from there, to its first end
# from anyone; with none at all, it never ended. A later attempt that started before it ended ran beside
# it: a late start after the retry's is one too.
# Not the worker's own `preempted` of a lost node (streams/lost_nodes.py; found by review): it re-queues
# the job, but an agent still alive runs on until the fence sent with it comes, and reports the run's
# real end later, maybe after the retry started elsewhere. It is the attempt's first `preempted` with
# the lost node's reason: the fence carries that reason too, and an agent's answer to it echoes it.
_RAN_TWICE = """
SELECT later.cluster, later.job_id, later.attempt FROM (
    SELECT cluster, job_id, attempt,
           minIf(at, state = 'started') AS started_at,
           countIf(is_end) AS ends,
           if(countIf(agents_end) > 0, minIf(at, agents_end), minIf(at, is_end)) AS ended_at
    FROM (
        SELECT cluster, job_id, attempt, state, at, is_end, reason,
               is_end AND (ran_on = '' OR node = ran_on) AND NOT (lost AND at = worker_at)
                   AND reason != '__RESTARTED__' AS agents_end
        FROM (
            SELECT cluster, job_id, attempt, state, reason, (kafka_partition, kafka_offset, event_time) AS at,
                   state IN ('finished', 'failed', 'preempted') AS is_end, ifNull(node_id, '') AS node,
                   state = 'preempted' AND match(reason, '__LOST__') AS lost,
                   argMinIf(node, at, state = 'started') OVER attempt_rows AS ran_on,
                   minIf(at, lost) OVER attempt_rows AS worker_at
            FROM __LIFECYCLE__
            WINDOW attempt_rows AS (PARTITION BY cluster, job_id, attempt)
        )
    )
    GROUP BY cluster, job_id, attempt HAVING countIf(state = 'started') > 0
) AS earlier
INNER JOIN (
    SELECT cluster, job_id, attempt, min((kafka_partition, kafka_offset, event_time)) AS started_at
    FROM __LIFECYCLE__ WHERE state = 'started' GROUP BY cluster, job_id, attempt
) AS later ON earlier.cluster = later.cluster AND earlier.job_id = later.job_id
WHERE earlier.attempt < later.attempt
  AND (earlier.ends = 0 OR earlier.ended_at < earlier.started_at OR earlier.ended_at > later.started_at)
GROUP BY later.cluster, later.job_id, later.attempt ORDER BY later.cluster, later.job_id, later.attempt
"""
#: the reason of the worker's own ``preempted`` of a placement on a lost node (LostNodes.check)
_RAN_TWICE = _RAN_TWICE.replace("__LOST__", NODE_LOST_REASON_RE.replace("\\", "\\\\")).replace(  # (SQL literals)
    "__RESTARTED__", AGENT_RESTART_LOST_REASON).replace("__LIFECYCLE__", _LIFECYCLE)  # (a restarted agent's report of a run it lost: not when the run
# ended, found by review: an agent back an hour later made its run last an hour, and the retry ran twice)

# An attempt that started once the job was done (found by review: a job whose attempt finished, or that
# the worker gave up on, and whose next attempt was then placed and ran, was reconciled; the checks above
# look within one attempt or at two attempts running at once, and the fix of daa637f, a finished job run
# again on another node, would not have been caught). Done: another attempt's `finished`, or the worker's
# `rejected` notice (its give-up, archived on the lifecycle topic; a rejected decision's notice too),
# read before the attempt's first `started`, in the order the worker read them as above. Not the
# attempt's own `finished`: a start after it is `started_twice`'s. Not a gang member's earlier attempt's
# `finished` either: the worker places the whole gang again (streams/state.py, "not for a gang member";
# found by review of this check).
_RAN_AFTER_DONE = """
SELECT s.cluster, s.job_id, s.attempt FROM (
    SELECT cluster, job_id, attempt, min((kafka_partition, kafka_offset, event_time)) AS started_at
    FROM __LIFECYCLE__ WHERE state = 'started' GROUP BY cluster, job_id, attempt
) AS s
INNER JOIN (
    SELECT cluster, job_id, attempt, state, (kafka_partition, kafka_offset, event_time) AS done_at
    FROM __LIFECYCLE__ WHERE state IN ('finished', 'rejected')
) AS done ON s.cluster = done.cluster AND s.job_id = done.job_id
WHERE done.done_at < s.started_at
  AND (done.state = 'rejected' OR (done.attempt != s.attempt AND (s.cluster, s.job_id) NOT IN
       (SELECT cluster, job_id FROM jobs_submitted_accepted WHERE gang_size > 1)))
GROUP BY s.cluster, s.job_id, s.attempt ORDER BY s.cluster, s.job_id, s.attempt
""".replace("__LIFECYCLE__", _LIFECYCLE)


def reconcile(client: ArchiveClient) -> Reconciliation:
    """Jobs the system lost track of, and jobs placed, started or run twice, or run after they were done."""
    _, unacc = client.query_rows(_UNACCOUNTED)
    _, placed = client.query_rows(_PLACED_TWICE)
    _, started = client.query_rows(_STARTED_TWICE)
    _, both = client.query_rows(_RAN_TWICE)
    _, after = client.query_rows(_RAN_AFTER_DONE)
    return Reconciliation(
        unaccounted=[(r[0], r[1]) for r in unacc],
        placed_twice=[(r[0], r[1], int(r[2])) for r in placed],
        started_twice=[(r[0], r[1], int(r[2])) for r in started],
        ran_twice=[(r[0], r[1], int(r[2])) for r in both],
        ran_after_done=[(r[0], r[1], int(r[2])) for r in after],
    )
