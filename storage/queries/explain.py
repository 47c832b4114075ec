"""One job's story: its events in time order and a human answer to "why is it pending /
why did it land there".

A job is a cluster and a job id: an id is unique only among the clusters one worker serves (README,
"Ids"), so two clusters on two workers may both have a job "job1" (with the same decision ids when their
submissions share an event id). A
story is one cluster's: :func:`job_clusters` says which clusters hold an id, and :func:`explain` of an
id several hold needs the cluster (:class:`AmbiguousJob` otherwise)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from storage.client import ArchiveClient
from storage.queries._common import _dicts, _dt


@dataclass(frozen=True)
class TimelineEntry:
    time: datetime
    source: str  # "submitted" | "decision" | "action" | "lifecycle"
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    job_id: str
    submission: dict[str, Any] | None
    decisions: list[dict[str, Any]]
    lifecycle: list[dict[str, Any]]
    timeline: list[TimelineEntry]
    answer: str
    #: the cluster whose job this is (None: no cluster holds the id)
    cluster: str | None = None


class AmbiguousJob(ValueError):
    """:func:`explain` of a job id that several clusters hold, without naming one."""

    def __init__(self, job_id: str, clusters: list[str]) -> None:
        super().__init__(f"job {job_id} is in clusters {', '.join(clusters)} (a job id is unique only within a "
                         "cluster): name one")  # fmt: skip
        self.job_id, self.clusters = job_id, clusters


#: the refused message's cluster, '' when it names none (not JSON, or no cluster field)
_DEAD_CLUSTER = "JSONExtractString(original, 'cluster')"

# every cluster with a submission (accepted or refused for its state), decision, command or report of the
# job, or a dead-lettered submission that names its cluster
_CLUSTERS = f"""
SELECT cluster FROM (
    SELECT toString(cluster) AS cluster FROM jobs_submitted WHERE job_id = %(job)s
    UNION ALL SELECT toString(cluster) FROM decisions_applied WHERE job_id = %(job)s
    UNION ALL SELECT toString(cluster) FROM actions WHERE job_id = %(job)s
    UNION ALL SELECT toString(cluster) FROM jobs_lifecycle_applied WHERE job_id = %(job)s
    UNION ALL SELECT {_DEAD_CLUSTER} FROM deadletter WHERE topic = 'jobs.submitted' AND message_key = %(job)s)
WHERE cluster != '' GROUP BY cluster ORDER BY cluster
"""

_SUBMISSION = """
SELECT job_id, cluster, tenant, user, priority, qos, cpu_milli, memory_mib, num_gpu, gpu_milli,
       gpu_models, gang_id, gang_size, name, toUnixTimestamp64Milli(event_time) AS t_ms
FROM jobs_submitted_accepted WHERE job_id = %(job)s __CLUSTER__ ORDER BY event_time LIMIT 1
"""

_DECISIONS = """
SELECT decision_id, attempt, outcome, node_id, gpu_indices, policy, model_version, candidates,
       feasible_nodes, predicted_duration_s, predicted_cost, predicted_run_time_s, latency_ms, reason,
       fallback,
       toUnixTimestamp64Milli(event_time) AS t_ms
FROM decisions_applied WHERE job_id = %(job)s __CLUSTER__ ORDER BY event_time, event_id
"""

_ACTIONS = """
SELECT kind, decision_id, node_id, reason, toUnixTimestamp64Milli(event_time) AS t_ms
FROM actions FINAL WHERE job_id = %(job)s __CLUSTER__ ORDER BY event_time, event_id
"""

# a submission the worker refused (malformed, too large, misplaced, a job id seen before): the
# producer's key is the job id; of one cluster's job, those that name that cluster or none
_DEADLETTERS = """
SELECT reason, toUnixTimestamp64Milli(event_time) AS t_ms
FROM deadletter FINAL WHERE topic = 'jobs.submitted' AND message_key = %(job)s __DEAD_CLUSTER__
ORDER BY event_time, event_id
"""

_LIFECYCLE = """
SELECT state, attempt, node_id, exit_code, reason, log_tail, toUnixTimestamp64Milli(event_time) AS t_ms,
       kafka_partition, kafka_offset
FROM jobs_lifecycle_applied WHERE job_id = %(job)s __CLUSTER__ ORDER BY event_time, event_id
"""


def _of(sql: str, cluster: str | None) -> str:
    """``sql`` for one cluster's rows (``%(cluster)s``), or, ``cluster`` None, every row of the job id."""
    one = cluster is not None
    return (sql.replace("__CLUSTER__", "AND cluster = %(cluster)s" if one else "")
            .replace("__DEAD_CLUSTER__", f"AND {_DEAD_CLUSTER} IN ('', %(cluster)s)" if one else ""))  # fmt: skip


def _candidates_text(cands: list[Any], n: int = 3) -> str:
    parts = []
    for c in cands[:n]:
        node, score = (c["node_id"], c["score"]) if isinstance(c, dict) else (c[0], c[1])
        parts.append(f"{node} ({float(score):.3g})")
    return ", ".join(parts)


def _answer(job_id: str, sub: dict[str, Any] | None, decs: list[dict[str, Any]], life: list[dict[str, Any]],
            dead: list[dict[str, Any]]) -> str:  # fmt: skip
    if sub is None and not decs and dead:
        last = dead[-1]
        return (f"Job {job_id} was never scheduled: its submission was refused at {last['time'].isoformat()} and "
                f"went to the dead-letter topic: {_text(last['reason'])}.")  # fmt: skip
    if sub is None and not decs and not life:
        return f"Job {job_id} is not in the archive: no submission, decision or lifecycle event."
    if sub is None and not decs:
        last = life[-1]
        return (f"Job {job_id} was never submitted: the archive holds only {len(life)} lifecycle report(s) for it "
                f"(last: {last['state']} at {last['time'].isoformat()}), which no scheduling decision explains.")  # fmt: skip
    placed = [d for d in decs if d["outcome"] == "placed"]
    last_life = _last_report(life, max((int(d["attempt"]) for d in placed), default=0))
    last_dec = decs[-1] if decs else None
    where = ""
    if placed:
        # the placement of the report's attempt (found by review: an earlier attempt's finish, read after
        # the next attempt's stale decision, was "placed on" that decision's node), else the last one
        its = [d for d in placed if last_life is not None and d["attempt"] == last_life["attempt"]]
        p = (its or placed)[-1]
        why = f" because {p['reason']}" if p["reason"] else ""
        cands = _candidates_text(p["candidates"] or [])
        top = f" (top candidates: {cands}; {p['feasible_nodes']} feasible nodes)" if cands else ""
        # a fallback record names the version whose call failed: it did not decide
        failed = f"model {p['model_version']}" if p["model_version"] else "the configured scorer"
        fb = f" (heuristic fallback: {failed} failed)" if p["fallback"] else ""
        mv = f" model {p['model_version']}" if p["model_version"] and not p["fallback"] else ""
        where = f"placed on node {p['node_id']} by policy {p['policy']}{mv}{why}{top}{fb}"
    if last_life is not None:
        state, t = last_life["state"], last_life["time"].isoformat()
        node = last_life["node_id"] or (p["node_id"] if placed else "?")
        if state == "finished":
            jct = ""
            if sub is not None:
                jct = f" (JCT {(last_life['time'] - sub['time']).total_seconds():.1f}s)"
            return f"Job {job_id} finished on node {node} at {t}{jct}; it was {where or 'placed'}."
        if state == "rejected":
            return f"Job {job_id} was rejected at {t}: {last_life['reason'] or 'no reason recorded'}."
        if state == "started":
            return f"Job {job_id} is running on node {node} since {t}; it was {where or 'placed'}."
        if state in ("failed", "preempted", "timed_out") and (
            last_dec is None or last_dec["time"] <= last_life["time"]
        ):
            extra = f" (exit code {last_life['exit_code']})" if last_life["exit_code"] is not None else ""
            reason = f": {last_life['reason']}" if last_life["reason"] else ""
            return (
                f"Job {job_id} {state.replace('_', ' ')} on node {node} at {t}{extra}{reason}; "
                f"it is waiting to be re-placed (attempt {int(last_life['attempt']) + 1})."
            )
    if last_dec is not None and last_dec["outcome"] == "placed":
        return f"Job {job_id} was {where}; no agent has confirmed the start yet."
    if last_dec is not None:
        reason = last_dec["reason"] or "no reason recorded"
        return (
            f"Job {job_id} is pending because {reason} (policy {last_dec['policy']}, "
            f"{last_dec['feasible_nodes']} feasible nodes, last tried {last_dec['time'].isoformat()}, "
            f"{len(decs)} decision(s) so far)."
        )
    since = f" since {sub['time'].isoformat()}" if sub is not None else ""
    return f"Job {job_id} is pending{since}: no scheduling decision has been recorded for it yet."


def _last_report(life: list[dict[str, Any]], placed: int = 0) -> dict[str, Any] | None:
    """The lifecycle report that says where the job stands, as the worker applied them: a final one
    (``finished`` before ``rejected``, as :func:`~storage.queries.metrics.jobs_sql` decides the job's state;
    wherever it sorts: found by review, the worker's give-up notice
    shares the failure's millisecond, and half the given-up jobs were "waiting to be re-placed"),
    else the last the worker read (its lifecycle partition's order) but a ``timed_out`` read after its
    attempt's first ``started`` (it keeps that run: the timeout raced its start; the rule of the archive's
    stability metric, ``PLACEMENTS``) and a ``started`` read after its attempt's timeout (a late start,
    fenced: the job went back to the queue), and any report of an attempt below the job's current one (the
    highest started, or ``placed``: the highest placed attempt): that attempt was superseded, and what its
    node said late (a late start fenced and answered ``preempted``, an agent's answer to a lost node's
    fence) is not where the job stands (found by review: "preempted on n1, waiting to be re-placed" while
    the next attempt ran on n2)."""
    final = [e for e in life if e["state"] in ("finished", "rejected")]
    if final:  # a finish wins over a give-up notice, as the job metrics count it (found by review)
        return next((e for e in reversed(final) if e["state"] == "finished"), final[-1])
    current = max([placed] + [int(e["attempt"]) for e in life if e["state"] == "started"])
    life = [e for e in life if int(e["attempt"]) >= current]

    def read_at(e: dict[str, Any]) -> tuple[int, int]:  # where the worker read it: its lifecycle partition
        return int(e["kafka_partition"]), int(e["kafka_offset"])

    first_start: dict[int, tuple[int, int]] = {}
    for e in life:
        if e["state"] == "started":
            a = int(e["attempt"])
            first_start[a] = min(read_at(e), first_start.get(a, read_at(e)))
    kept = [e for e in life if not (e["state"] == "timed_out" and int(e["attempt"]) in first_start
                                    and read_at(e) > first_start[int(e["attempt"])])]  # fmt: skip
    timed_out = {int(e["attempt"]) for e in kept if e["state"] == "timed_out"}  # (read before any start of it)
    # a start read after its attempt's timeout is a late one the worker fenced: the job went back to the queue
    kept = [e for e in kept if not (e["state"] == "started" and int(e["attempt"]) in timed_out)]
    return max(kept, key=read_at) if kept else None  # the last the worker read


def job_clusters(client: ArchiveClient, job_id: str) -> list[str]:
    """The clusters that hold ``job_id`` (a submission, decision, command or report, or a refused
    submission that names its cluster), in order; more than one when clusters reuse the id."""
    return [_text(r[0]) for r in client.query_rows(_CLUSTERS, {"job": job_id})[1]]


def explain(client: ArchiveClient, job_id: str, cluster: str | None = None) -> Explanation:
    """Everything the archive knows about one job, in time order, and a human answer to
    "why is it pending / why did it land there". ``cluster``: the job of that cluster; None: of the
    one cluster that holds ``job_id`` (:class:`AmbiguousJob` when several do: their stories are not
    mixed)."""
    if cluster is None:
        clusters = job_clusters(client, job_id)
        if len(clusters) > 1:
            raise AmbiguousJob(job_id, clusters)
        cluster = clusters[0] if clusters else None
    p = {"job": job_id} | ({} if cluster is None else {"cluster": cluster})
    subs = _dicts(client, _of(_SUBMISSION, cluster), p)
    decs = _dicts(client, _of(_DECISIONS, cluster), p)
    acts = _dicts(client, _of(_ACTIONS, cluster), p)
    life = _dicts(client, _of(_LIFECYCLE, cluster), p)
    dead = _dicts(client, _of(_DEADLETTERS, cluster), p)
    for rows in (subs, decs, acts, life, dead):
        for r in rows:
            r["time"] = _dt(r.pop("t_ms"))
    sub = subs[0] if subs else None
    timeline: list[TimelineEntry] = []
    if sub is not None:
        gpu = f", {sub['num_gpu']} GPU" if sub["num_gpu"] else ""
        timeline.append(TimelineEntry(sub["time"], "submitted",
                                      f"submitted by {sub['user'] or sub['tenant']} to {sub['cluster']}: "
                                      f"{sub['cpu_milli']}m CPU, {sub['memory_mib']} MiB{gpu}, "
                                      f"priority {sub['priority']} {sub['qos']}", sub))  # fmt: skip
    for d in decs:
        cands = _candidates_text(d["candidates"] or [])
        head = f"placed on {d['node_id']}" if d["outcome"] == "placed" else "not placed"
        text = f"{head} by {d['policy']} (attempt {d['attempt']}, {d['latency_ms']:.1f} ms)"
        if d["reason"]:
            text += f": {d['reason']}"
        if d["predicted_cost"] is not None:  # the learned cost estimator ψ on the chosen node
            text += f"; ψ: {d['predicted_cost']:+.3f} GPU fragmentation"
            if d["predicted_run_time_s"] is not None:
                text += f", expected run time {d['predicted_run_time_s']:,.0f} s"
        if cands:
            text += f"; candidates {cands}"
        timeline.append(TimelineEntry(d["time"], "decision", text, d))
    for a in acts:
        timeline.append(TimelineEntry(a["time"], "action", f"{a['kind']} → {a['node_id']}", a))
    for e in life:
        text = f"{e['state']}" + (f" on {e['node_id']}" if e["node_id"] else "")
        if e["exit_code"] is not None:
            text += f" (exit {e['exit_code']})"
        if e["reason"]:
            text += f": {e['reason']}"
        timeline.append(TimelineEntry(e["time"], "lifecycle", text, e))
    for d in dead:
        timeline.append(TimelineEntry(d["time"], "dead letter", f"submission refused: {_text(d['reason'])}", d))
    order = {"submitted": 0, "dead letter": 1, "decision": 2, "action": 3, "lifecycle": 4}
    timeline.sort(key=lambda x: (x.time, order[x.source]))
    return Explanation(job_id, sub, decs, life, timeline, _answer(job_id, sub, decs, life, dead), cluster)


def _text(value: Any) -> str:
    """A String column as text (the archive returns ClickHouse strings as bytes)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
