"""Reconciliation: jobs the system lost track of, and jobs placed or started twice."""

from __future__ import annotations

from dataclasses import dataclass

from storage.client import ArchiveClient
from storage.queries._common import running_jobs


@dataclass(frozen=True)
class Reconciliation:
    #: submitted and accepted (not dead-lettered), but neither finished, running, nor rejected with a reason
    unaccounted: list[str]
    #: (job_id, attempt) placed more than once: two decision ids or two nodes for one attempt
    placed_twice: list[tuple[str, int]]
    #: (job_id, attempt) with more than one distinct ``started`` event
    started_twice: list[tuple[str, int]]

    @property
    def ok(self) -> bool:
        return not (self.unaccounted or self.placed_twice or self.started_twice)


# A submission the worker dead-lettered (a clock too far ahead, a job id in use) is archived like any
# other (the archiver admits on the message alone, streams/admission.py) and its dead letter names
# the message it refused (topic, partition, offset): that one was refused with a reason, not lost.
# Not one dead-lettered for an internal error while it was handled: the worker applies it again
# (streams/log_restore.py), so whether it was lost is what reconciliation must still say.
# The raw rows, not FINAL: FINAL keeps one row per event id, and a copy of the event sent again
# later (and accepted) must not hide behind its dead-lettered twin.
_UNACCOUNTED = """
SELECT DISTINCT job_id FROM jobs_submitted
WHERE (kafka_partition, kafka_offset) NOT IN
      (SELECT topic_partition, topic_offset FROM deadletter WHERE topic = 'jobs.submitted'
       AND NOT startsWith(reason, 'internal error'))
  AND job_id NOT IN (SELECT job_id FROM jobs_lifecycle FINAL WHERE state = 'finished')
  AND job_id NOT IN (SELECT job_id FROM jobs_lifecycle FINAL WHERE state = 'rejected' AND reason != '')
  AND job_id NOT IN (__RUNNING__)
ORDER BY job_id
"""
_UNACCOUNTED = _UNACCOUNTED.replace("__RUNNING__", running_jobs("jobs_lifecycle_accepted"))

# Not FINAL on purpose: a re-decision of one attempt carries the same event_id (=
# decision_id), so FINAL would collapse two different placements into one row. Raw rows
# include redeliveries, which are identical (same decision id, same node) and so harmless.
_PLACED_TWICE = """
SELECT job_id, attempt FROM (
    SELECT job_id, attempt, decision_id, node_id FROM decisions WHERE outcome = 'placed'
    UNION ALL
    SELECT assumeNotNull(job_id), assumeNotNull(attempt), decision_id, toNullable(toString(node_id))
    FROM actions WHERE kind = 'place'
)
GROUP BY job_id, attempt
HAVING uniqExact(decision_id) > 1 OR uniqExact(node_id) > 1
ORDER BY job_id, attempt
"""

_STARTED_TWICE = """
SELECT job_id, attempt FROM jobs_lifecycle FINAL WHERE state = 'started'
GROUP BY job_id, attempt HAVING count() > 1 ORDER BY job_id, attempt
"""


def reconcile(client: ArchiveClient) -> Reconciliation:
    """Jobs the system lost track of, and jobs placed or started twice."""
    _, unacc = client.query_rows(_UNACCOUNTED)
    _, placed = client.query_rows(_PLACED_TWICE)
    _, started = client.query_rows(_STARTED_TWICE)
    return Reconciliation(
        unaccounted=[r[0] for r in unacc],
        placed_twice=[(r[0], int(r[1])) for r in placed],
        started_twice=[(r[0], int(r[1])) for r in started],
    )
