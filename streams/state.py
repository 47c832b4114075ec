"""Job state transitions, as pure functions over the records the Faust tables hold.

The worker keeps these changelogged tables (see ``streams/app.py``); every change to them
is one of the transitions below, caused by an event that is on a topic before the change
is made (a submission, a telemetry or lifecycle report, or one of the worker's own
decisions). The state is event-sourced: a restarted worker rebuilds it from changelogs
and re-reads uncommitted events, and every transition here is idempotent.

- ``pending[job_id]``  = :class:`PendingJob`   (accepted, waiting for a placement)
- ``running[job_id]``  = :class:`RunningJob`   (placed: ``reserved`` until its agent confirms
  ``started``, then ``running``; it holds its resources either way)
- ``done[job_id]``     = :class:`DoneJob`      (finished, or rejected with a reason)

Each function returns a :class:`Transition` naming the table writes to perform, so the
same logic is unit-tested without Faust and applied by the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from scheduling.events import (
    MAX_ATTEMPT,
    MAX_TEXT,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    PreemptCommand,
    cut_text,
    derived_event_id,
    is_decision_of,
)
from scheduling.job import JobRequest
from scheduling.order_context import service_rate


class PendingJob(BaseModel):
    job: JobSubmitted
    attempt: int = 0  # placements so far (each gets its own decision id)
    failures: int = 0  # failed or timed-out attempts: the retry budget (preemptions do not count)
    submit_ts: float  # epoch seconds of the original submission
    queued_ts: float  # when this attempt entered the queue
    # service received in earlier attempts' runs (rate x seconds run: scheduling.order_context.service_rate),
    # what 2D-LAS ranks by (found by review: the worker never kept it, and its las was FIFO)
    attained: float = 0.0


class RunningJob(BaseModel):
    job: JobSubmitted
    attempt: int
    failures: int = 0
    submit_ts: float
    decision_id: str
    node_id: str
    gpu_indices: list[int]
    state: Literal["reserved", "running"] = "reserved"
    reserved_ts: float
    started_ts: float | None = None
    attained: float = 0.0  # as PendingJob's: earlier attempts' service, not this run's


class DoneJob(BaseModel):
    job_id: str
    event_id: str  # the submission's event id (tells redelivery from a re-used job id)
    status: Literal["finished", "rejected"]
    attempt: int
    reason: str = ""
    gang_id: str | None = None  # a rejected member takes its gang down; a finished one counts toward it
    cluster: str = ""  # whose gang (a gang id is a cluster's); "" in records written before it was kept
    # when it became done (epoch s, the worker's clock: Worker.apply stamps it); the done table forgets it
    # SEMSCHED_DONE_RETENTION after (streams/done_retention.py); 0 in records written before it was kept
    done_ts: float = 0.0
    # a finished run: where it ran and when its agent said it ended (the agent's clock); its ``started`` read
    # again (after a restart) is no run to fence. "" / 0 when not known (rejected, or written before)
    node_id: str = ""
    ended_at: float = 0.0


@dataclass
class Transition:
    """Table writes: ``None`` deletes the key. ``emit`` are lifecycle events to publish."""

    pending: dict[str, PendingJob | None] = field(default_factory=dict)
    running: dict[str, RunningJob | None] = field(default_factory=dict)
    done: dict[str, DoneJob | None] = field(default_factory=dict)
    emit: list[JobLifecycle] = field(default_factory=list)
    commands: list[PreemptCommand] = field(default_factory=list)  # for the agents (actions topic)
    note: str = ""  # why nothing happened (idempotent no-op), for logs and tests
    deadletter: str | None = None  # reason, when the event must go to the dead-letter topic
    # a decision applied: the id whose placement the job holds after it (placed now, or found placed by that
    # same decision, back from the topic first); "" when it holds none of the decision's (stale, a rejection)
    holds: str = ""


def on_submitted(ev: JobSubmitted, known: PendingJob | RunningJob | DoneJob | None, now: float) -> Transition:
    if known is not None:
        known_event = known.event_id if isinstance(known, DoneJob) else known.job.event_id
        if known_event == ev.event_id:
            return Transition(note="redelivered submission: already accepted")
        theirs = None if isinstance(known, DoneJob) else known.job.cluster
        if theirs is not None and theirs != ev.cluster:
            return Transition(deadletter=f"job id {ev.job_id!r} is cluster {theirs!r}'s on this worker (event "
                                         f"{known_event}): job ids must be unique across the clusters a worker serves")  # fmt: skip
        return Transition(deadletter=f"job id {ev.job_id!r} was already submitted (event {known_event})")
    ts = ev.event_time.timestamp()
    return Transition(pending={ev.job_id: PendingJob(job=ev, submit_ts=ts, queued_ts=now)})


def places_its_job(t: Transition, rec: DecisionRecord) -> bool:
    """Whether ``rec``, once applied (``t``: :func:`on_decision`'s), holds its job's placement: it placed
    the job now, or came back from the topic first and placed it there (``Transition.holds``). Only then
    may its command go out. A stale one (the job was re-queued, finished or placed by another decision
    while the step that made it waited on the model or the broker) sends none: that would run the job again."""
    return rec.outcome == "placed" and t.holds == rec.decision_id


def on_decision(rec: DecisionRecord, pending: PendingJob | None,
                current: RunningJob | DoneJob | None = None) -> Transition:  # fmt: skip
    """A decision the worker published comes back: apply it (first one wins). ``current``: where the
    job is now when it is not pending (running or done), to tell the worker's own decision coming
    back from the topic after the loop applied it (every one does) from a stale one."""
    if rec.outcome == "unschedulable":
        return Transition(note="unschedulable: archive only")
    if pending is None or pending.attempt != rec.attempt:
        if isinstance(current, RunningJob) and current.decision_id == rec.decision_id:
            if (current.node_id, list(current.gpu_indices)) == (rec.node_id, list(rec.gpu_indices)):
                return Transition(note="already applied: this decision, back from the topic", holds=rec.decision_id)
            # its id holds another placement (made by another owner of the partition, restored since): this
            # one is stale, and its command would start a second run
            return Transition(note=f"stale decision: its id holds the placement on {current.node_id}")
        if isinstance(current, DoneJob) and current.attempt == rec.attempt:
            return Transition(note="already applied: this decision, back from the topic; its attempt is over")
        return Transition(note="stale decision: job no longer pending at this attempt")
    if rec.outcome == "rejected":
        reason = cut_text(rec.reason, MAX_TEXT)  # a decision's reason is unbounded, the notice's is not
        done = DoneJob(job_id=rec.job_id, event_id=pending.job.event_id, status="rejected", gang_id=pending.job.gang_id,
                       attempt=rec.attempt, reason=reason, cluster=pending.job.cluster)  # fmt: skip
        notice = JobLifecycle(job_id=rec.job_id, cluster=rec.cluster, state="rejected", attempt=rec.attempt,
                              decision_id=rec.decision_id, reason=reason, event_time=rec.event_time,
                              event_id=derived_event_id(rec.event_id, "rejected"))  # fmt: skip
        return Transition(pending={rec.job_id: None}, done={rec.job_id: done}, emit=[notice])
    assert rec.node_id is not None
    run = RunningJob(
        job=pending.job, attempt=pending.attempt, failures=pending.failures, submit_ts=pending.submit_ts,
        decision_id=rec.decision_id, attained=pending.attained,
        node_id=rec.node_id, gpu_indices=list(rec.gpu_indices), reserved_ts=rec.event_time.timestamp(),
    )  # fmt: skip
    return Transition(pending={rec.job_id: None}, running={rec.job_id: run}, holds=rec.decision_id)


def on_lifecycle(ev: JobLifecycle, running: RunningJob | None, *, max_retries: int, now: float,
                 pending: PendingJob | None = None, done: DoneJob | None = None,
                 node_gpus: int | None = None) -> Transition:  # fmt: skip
    """Agent reports (and the worker's own timeouts) move a placed job on.

    An agent's report can overtake the worker's own decision (they travel on different
    topics). When the job is still pending and the report names the decision id of its
    current attempt (decision ids are deterministic), the report stands for the decision:
    the placement is applied from it, and the decision, when it arrives, is stale.

    A ``started`` report that says which GPUs the job holds (one that stands for the decision, or
    one from another node than the placement's) must name as many distinct GPUs as the job asks
    for, each on the node (``node_gpus``: the reporting node's GPU count, when known); else it is
    dead-lettered, the tables unchanged (found by review: a report without ``gpu_indices`` was
    taken as it was, the ledger could not account the holding and dropped all of it, CPU too, and
    the next step placed another job on the same GPUs).
    """
    if ev.state == "rejected":
        return Transition(note="rejection notice: archive only")
    if (late := _finished_before_its_next_attempt(ev, running, pending)) is not None:
        return late
    adopting = (running is None and pending is not None and bool(ev.node_id) and ev.state != "timed_out"
                and is_decision_of(ev.decision_id, pending.job.job_id, pending.attempt, pending.job.event_id))  # fmt: skip
    placing = running if running is not None and ev.decision_id == running.decision_id else None
    names_gpus = ev.state == "started" and (adopting or (
        placing is not None and placing.state == "reserved" and bool(ev.node_id)
        and (ev.node_id != placing.node_id or bool(ev.gpu_indices))))  # fmt: skip
    job = pending.job if adopting and pending is not None else placing.job if placing is not None else None
    if names_gpus and job is not None and (why := gpu_indices_problem(ev.gpu_indices, job.num_gpu, node_gpus)):
        return Transition(deadletter=f"started report of {ev.job_id} ({ev.decision_id}) on {ev.node_id}: {why}")
    adopted: Transition | None = None
    if adopting and pending is not None:
        running = RunningJob(job=pending.job, attempt=pending.attempt, failures=pending.failures,
                             submit_ts=pending.submit_ts, decision_id=ev.decision_id, node_id=ev.node_id,
                             gpu_indices=list(ev.gpu_indices), reserved_ts=ev.event_time.timestamp(),
                             attained=pending.attained)  # fmt: skip
        adopted = Transition(pending={pending.job.job_id: None})
    if running is None or ev.decision_id != running.decision_id:
        if running is None and pending is None and _started_of_its_finished_run(ev, done):
            return Transition(note="started of a run that has finished: read again")
        if ev.state == "started" and ev.decision_id and ev.node_id:
            # a placement the worker already gave up on (timed out, re-queued) started after
            # all: fence it, or the job runs twice and holds resources nobody accounts for
            fence = PreemptCommand(decision_id=f"fence-{ev.decision_id}", job_id=ev.job_id, cluster=ev.cluster,
                                   node_id=ev.node_id, target_decision_id=ev.decision_id,
                                   reason="superseded placement: it started after the worker had re-queued it")  # fmt: skip
            return Transition(commands=[fence], note="stale started: fenced")
        return Transition(note=f"stale {ev.state}: no such placement")
    t = _advance(ev, running, max_retries=max_retries, now=now)
    if adopted is not None:
        t.pending = {**adopted.pending, **t.pending}
        t.running.setdefault(running.job.job_id, running)
    return t


def gpu_indices_problem(indices: list[int], num_gpu: int, node_gpus: int | None) -> str | None:
    """Why ``indices`` cannot be the GPUs of a job of ``num_gpu`` GPUs on a node of ``node_gpus``, else None."""
    if len(indices) != num_gpu:
        return f"gpu_indices {list(indices)} name {len(indices)} GPU(s), the job asks for {num_gpu}"
    if len(set(indices)) != len(indices):
        return f"gpu_indices {list(indices)} name a GPU twice"
    if node_gpus is not None and indices and max(indices) >= node_gpus:
        return f"gpu_indices {list(indices)} name a GPU the node does not have (it has {node_gpus})"
    return None


def _started_of_its_finished_run(ev: JobLifecycle, done: DoneJob | None) -> bool:
    """Whether ``ev`` is the ``started`` of the run that finished the job (``done``): that attempt, its node,
    stamped before its end by the same agent's clock. Read again after a restart (the lifecycle partition's
    committed offset behind what was handled), it was fenced as a placement that started after the worker
    had re-queued it: a fence for every such job, 601 of 1,000 in a chaos run. Any other start is fenced."""
    return (done is not None and ev.state == "started" and done.status == "finished" and done.attempt == ev.attempt
            and bool(done.node_id) and ev.node_id == done.node_id and ev.event_time.timestamp() <= done.ended_at
            and is_decision_of(ev.decision_id, ev.job_id, ev.attempt, done.event_id))  # fmt: skip


def _finished_before_its_next_attempt(ev: JobLifecycle, running: RunningJob | None,
                                      pending: PendingJob | None) -> Transition | None:  # fmt: skip
    """A ``finished`` of the attempt before the job's current one, which has not started: the worker had
    moved the job on (its node was lost, its ``started`` came after the confirmation timeout) while the
    run went on to the end, and its agent reported that after the worker's own ``preempted`` / ``timed_out``.
    The job is done; a placement of the next attempt is fenced (found by review: the completed job was run
    again). Not for a gang member (its gang was moved on whole) or an attempt that started."""
    current = running if running is not None else pending
    if ev.state != "finished" or not ev.decision_id or current is None:
        return None
    if not is_decision_of(ev.decision_id, ev.job_id, ev.attempt, current.job.event_id):
        return None
    if current.attempt != ev.attempt + 1 or current.job.gang_id:
        return None
    if running is not None and running.state != "reserved":
        return None
    done = DoneJob(job_id=ev.job_id, event_id=current.job.event_id, status="finished", attempt=ev.attempt,
                   cluster=current.job.cluster, node_id=ev.node_id or "", ended_at=ev.event_time.timestamp())  # fmt: skip
    if running is None:
        return Transition(pending={ev.job_id: None}, done={ev.job_id: done}, note="finished after it was re-queued")
    fence = PreemptCommand(decision_id=f"fence-{running.decision_id}", job_id=ev.job_id, cluster=ev.cluster,
                           node_id=running.node_id, target_decision_id=running.decision_id,
                           reason=f"the job finished in its previous placement ({ev.decision_id} on {ev.node_id})")  # fmt: skip
    return Transition(running={ev.job_id: None}, done={ev.job_id: done}, commands=[fence],
                      note="finished after it was placed again: that placement fenced")  # fmt: skip


def _advance(ev: JobLifecycle, running: RunningJob, *, max_retries: int, now: float) -> Transition:
    job_id = running.job.job_id
    # a report from another node than the one it runs on: a second execution of the same placement
    # (its commands went to two nodes: re-decided elsewhere under the same id after a restart)
    elsewhere = running.state == "running" and bool(ev.node_id) and ev.node_id != running.node_id
    if ev.state == "started":
        if elsewhere:  # stop it, or the job runs twice and that node's use is never counted
            fence = PreemptCommand(decision_id=f"fence-{ev.decision_id}-{ev.node_id}", job_id=ev.job_id,
                                   cluster=ev.cluster, node_id=ev.node_id, target_decision_id=ev.decision_id,
                                   reason=f"a second execution of this placement: it runs on {running.node_id}")  # fmt: skip
            return Transition(commands=[fence], note="started on a second node: fenced")
        if running.state == "running":
            return Transition(note="duplicate started")
        # the agent says where it really runs (after a restart the worker may have re-decided
        # the same attempt elsewhere; the agent executed the first command of that id)
        node = ev.node_id or running.node_id
        moved = bool(ev.node_id) and ev.node_id != running.node_id
        gpus = list(ev.gpu_indices) if ev.gpu_indices or moved else running.gpu_indices
        upd = running.model_copy(update={"state": "running", "started_ts": ev.event_time.timestamp(),
                                         "node_id": node, "gpu_indices": gpus})  # fmt: skip
        return Transition(running={job_id: upd})
    if elsewhere:  # the second execution's end (its fence, a refusal): the job runs on where it runs
        return Transition(note=f"report from another node than the run's, ignored: {ev.state} from {ev.node_id}, "
                               f"the run is on {running.node_id}")  # (the part before ':' counts: no node ids in it)
    if ev.state == "finished":
        done = DoneJob(job_id=job_id, event_id=running.job.event_id, status="finished", attempt=running.attempt,
                       gang_id=running.job.gang_id, cluster=running.job.cluster, node_id=ev.node_id or running.node_id,
                       ended_at=ev.event_time.timestamp())  # fmt: skip
        return Transition(running={job_id: None}, done={job_id: done})
    if ev.state == "timed_out" and running.state == "running":
        return Transition(note="timeout raced with started: keep running")
    # failed, preempted, timed_out: back to the queue, or give up
    counts = ev.state != "preempted"
    attempt = running.attempt + 1
    failures = running.failures + (1 if counts else 0)
    # preemptions are not charged, but a job's attempts are bounded on the wire (MAX_ATTEMPT): one preempted
    # that often (say, its run takes its agent down each time) is given up, not decided with an attempt
    # number every decision record would refuse, which failed its cluster's every step
    if (counts and failures > max_retries) or attempt > MAX_ATTEMPT:
        why = (f"{failures} failed attempt(s) (max_retries={max_retries})" if counts and failures > max_retries
               else f"{attempt} attempts (the most a job may have: {MAX_ATTEMPT})")  # fmt: skip
        # (within the wire's limit: the agent's reason may fill it, and a notice over it was refused, the
        # report dead-lettered, and the job left running for ever; found by review)
        reason = cut_text(f"gave up after {why}; last: {ev.state}: {ev.reason or 'no reason given'}", MAX_TEXT)
        attempt = min(attempt, MAX_ATTEMPT)  # (the notice's attempt is on the wire too)
        done = DoneJob(job_id=job_id, event_id=running.job.event_id, status="rejected", attempt=attempt,
                       gang_id=running.job.gang_id, reason=reason, cluster=running.job.cluster)  # fmt: skip
        notice = JobLifecycle(job_id=job_id, cluster=running.job.cluster, state="rejected", attempt=attempt,
                              reason=reason, event_time=ev.event_time,
                              event_id=derived_event_id(ev.event_id, "rejected"))  # fmt: skip
        return Transition(running={job_id: None}, done={job_id: done}, emit=[notice])
    ran = 0.0 if running.started_ts is None else max(0.0, ev.event_time.timestamp() - running.started_ts)
    attained = running.attained + service_rate(JobRequest.from_event(running.job)) * ran
    # queued since the job left its node (the report's time; a clock ahead of ours: now; one behind: not
    # before the placement), not since this worker read the report: a backlog read after a restart, or a
    # restore, is minutes late (found by review)
    requeued = PendingJob(job=running.job, attempt=attempt, failures=failures, submit_ts=running.submit_ts,
                          queued_ts=min(now, max(ev.event_time.timestamp(), running.reserved_ts)),
                          attained=attained)  # fmt: skip
    return Transition(running={job_id: None}, pending={job_id: requeued})


def gang_fences(job: JobSubmitted, running: list[RunningJob], why: str) -> list[PreemptCommand]:
    """A gang runs all together or not at all: when one member goes back to the queue (or is
    given up), the members still placed are preempted too, so the whole gang is placed
    again together (preemptions do not use up their retry budget)."""
    if not job.gang_id:
        return []
    return [
        PreemptCommand(decision_id=f"gang-{r.decision_id}", job_id=r.job.job_id, cluster=r.job.cluster,
                       node_id=r.node_id, target_decision_id=r.decision_id,
                       reason=f"gang {job.gang_id}: member {job.job_id} {why}")  # fmt: skip
        for r in running
        if r.job.gang_id == job.gang_id and r.job.cluster == job.cluster and r.job.job_id != job.job_id
    ]
