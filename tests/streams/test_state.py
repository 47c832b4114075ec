"""Every job-state transition of ``streams/state.py``, on hand-made records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.events import (
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    decision_id_for,
    decode,
    derived_event_id,
)
from streams.state import (
    DoneJob,
    PendingJob,
    RunningJob,
    Transition,
    on_decision,
    on_lifecycle,
    on_submitted,
    places_its_job,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NOW = 1_800_000_000.0


def job(job_id: str = "j1", event_id: str = "ev-j1", **kw: object) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=event_id, event_time=T0, cluster="c1", cpu_milli=2000,
                        memory_mib=4096, **kw)  # fmt: skip


def pending(attempt: int = 0, j: JobSubmitted | None = None) -> PendingJob:
    j = j or job()
    return PendingJob(job=j, attempt=attempt, submit_ts=T0.timestamp(), queued_ts=T0.timestamp() + attempt)


def decision(outcome: str = "placed", *, attempt: int = 0, job_id: str = "j1", node_id: str | None = "n1",
             gpus: tuple[int, ...] = (), reason: str = "best fit") -> DecisionRecord:  # fmt: skip
    did = decision_id_for(job_id, attempt, f"ev-{job_id}") if outcome != "unschedulable" else f"u-{attempt}"
    return DecisionRecord(event_id=did, decision_id=did, job_id=job_id, cluster="c1", attempt=attempt,
                          outcome=outcome, node_id=node_id if outcome == "placed" else None,
                          gpu_indices=list(gpus), policy="best-fit", latency_ms=3.0, reason=reason,
                          event_time=datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC))  # fmt: skip


def running(attempt: int = 0, state: str = "reserved", *, node_id: str = "n1", failures: int = 0) -> RunningJob:
    t = on_decision(decision(attempt=attempt, node_id=node_id, gpus=(1,)), pending(attempt))
    r = t.running["j1"]
    assert r is not None
    r = r.model_copy(update={"failures": failures})
    if state == "running":
        r = r.model_copy(update={"state": "running", "started_ts": r.reserved_ts + 1})
    return r


def life(state: str, *, attempt: int = 0, decision_id: str | None = "auto", node_id: str | None = "n1",
         reason: str = "") -> JobLifecycle:  # fmt: skip
    did = decision_id_for("j1", attempt, "ev-j1") if decision_id == "auto" else decision_id
    return JobLifecycle(job_id="j1", cluster="c1", state=state, attempt=attempt, decision_id=did,
                        node_id=node_id, reason=reason,
                        event_time=datetime(2026, 3, 1, 12, 0, 9, tzinfo=UTC))  # fmt: skip


def assert_noop(t: Transition) -> None:
    assert t.pending == {} and t.running == {} and t.done == {} and t.emit == []
    assert t.deadletter is None
    assert t.note  # a no-op always says why


# -- submissions ----------------------------------------------------------------------------


def test_new_submission_is_accepted_into_pending() -> None:
    ev = job()
    t = on_submitted(ev, None, now=NOW)
    assert t.deadletter is None and t.running == {} and t.done == {} and t.emit == []
    p = t.pending["j1"]
    assert p is not None
    assert p.job == ev
    assert p.attempt == 0
    assert p.submit_ts == T0.timestamp()  # event time of the submission, not arrival
    assert p.queued_ts == NOW


@pytest.mark.parametrize(
    "known",
    [
        pytest.param(lambda: pending(), id="pending"),
        pytest.param(lambda: running(), id="running"),
        pytest.param(lambda: DoneJob(job_id="j1", event_id="ev-j1", status="finished", attempt=0), id="done"),
    ],
)
def test_redelivered_submission_is_a_noop(known) -> None:
    t = on_submitted(job(), known(), now=NOW)
    assert_noop(t)
    assert "redelivered" in t.note


@pytest.mark.parametrize(
    "known",
    [
        pytest.param(lambda: pending(), id="pending"),
        pytest.param(lambda: running(), id="running"),
        pytest.param(lambda: DoneJob(job_id="j1", event_id="ev-j1", status="rejected", attempt=2), id="done"),
    ],
)
def test_other_submission_reusing_a_job_id_is_deadlettered(known) -> None:
    t = on_submitted(job(event_id="ev-other"), known(), now=NOW)
    assert t.pending == {} and t.running == {} and t.done == {} and t.emit == []
    assert t.deadletter is not None
    assert "'j1'" in t.deadletter and "already submitted" in t.deadletter
    assert "ev-j1" in t.deadletter  # names the submission that owns the id


# -- decisions ------------------------------------------------------------------------------


def test_placement_moves_pending_to_reserved_running() -> None:
    p = pending()
    rec = decision(attempt=0, node_id="n7", gpus=(0, 3))
    t = on_decision(rec, p)
    assert t.pending == {"j1": None}
    assert t.done == {} and t.emit == [] and t.deadletter is None
    r = t.running["j1"]
    assert r is not None
    assert r.state == "reserved" and r.started_ts is None
    assert r.node_id == "n7" and r.gpu_indices == [0, 3]
    assert r.decision_id == rec.decision_id
    assert r.attempt == 0 and r.job == p.job and r.submit_ts == p.submit_ts
    assert r.reserved_ts == rec.event_time.timestamp()


def test_placement_applies_once_then_is_a_noop() -> None:
    rec = decision()
    first = on_decision(rec, pending())
    assert first.running["j1"] is not None
    # after applying, the job is no longer pending: the same decision again does nothing
    again = on_decision(rec, None)
    assert_noop(again)
    assert "stale" in again.note
    # the loop applied it, then it comes back from the topic: not stale, and counted apart
    echo = on_decision(rec, None, first.running["j1"])
    assert_noop(echo)
    assert echo.note.startswith("already applied")
    other = first.running["j1"].model_copy(update={"decision_id": "another"})
    assert "stale" in on_decision(rec, None, other).note  # a job placed by another decision
    done = DoneJob(job_id="j1", event_id="ev-j1", status="finished", attempt=0)
    assert on_decision(rec, None, done).note.startswith("already applied")  # it even finished since
    assert "stale" in on_decision(rec, None, done.model_copy(update={"attempt": 1})).note
    # which of them send the placement's command once applied (streams/step_publication.py)
    assert places_its_job(first, rec) and places_its_job(echo, rec)
    assert not places_its_job(again, rec) and not places_its_job(on_decision(rec, None, other), rec)
    assert not places_its_job(on_decision(rec, None, done), rec)  # its attempt is over: no second run


def test_decision_for_another_attempt_is_stale() -> None:
    t = on_decision(decision(attempt=0), pending(attempt=1))
    assert_noop(t)
    assert "stale" in t.note
    t = on_decision(decision(attempt=2), pending(attempt=1))
    assert_noop(t)


def test_unschedulable_decision_only_archives() -> None:
    t = on_decision(decision("unschedulable", reason="no node has 8 free GPUs"), pending())
    assert_noop(t)
    assert "unschedulable" in t.note


def test_rejection_moves_to_done_with_a_rejected_notice() -> None:
    rec = decision("rejected", reason="can never run in cluster 'c1': needs 99 GPUs")
    t = on_decision(rec, pending())
    assert t.pending == {"j1": None} and t.running == {}
    d = t.done["j1"]
    assert d == DoneJob(job_id="j1", event_id="ev-j1", status="rejected", attempt=0, cluster="c1",
                        reason="can never run in cluster 'c1': needs 99 GPUs")  # fmt: skip
    assert len(t.emit) == 1
    n = t.emit[0]
    assert (n.job_id, n.cluster, n.state, n.attempt, n.decision_id, n.reason) == (
        "j1", "c1", "rejected", 0, rec.decision_id, "can never run in cluster 'c1': needs 99 GPUs",
    )  # fmt: skip
    # applying the decision again (a replay, a restore) publishes the same notice, not a second one
    assert on_decision(rec, pending()).emit == [n]
    assert n.event_time == rec.event_time and n.event_id == derived_event_id(rec.event_id, "rejected")


def test_rejection_of_a_job_no_longer_pending_is_a_noop() -> None:
    assert_noop(on_decision(decision("rejected", reason="x"), None))


# -- lifecycle ------------------------------------------------------------------------------


def test_started_confirms_the_reservation() -> None:
    r = running()
    t = on_lifecycle(life("started", node_id="n1"), r, max_retries=3, now=NOW)
    assert t.pending == {} and t.done == {} and t.emit == []
    up = t.running["j1"]
    assert up is not None
    assert up.state == "running"
    assert up.started_ts == datetime(2026, 3, 1, 12, 0, 9, tzinfo=UTC).timestamp()
    assert up.decision_id == r.decision_id and up.gpu_indices == r.gpu_indices and up.node_id == "n1"


def test_duplicate_started_is_a_noop() -> None:
    r = running(state="running")
    t = on_lifecycle(life("started"), r, max_retries=3, now=NOW)
    assert_noop(t)
    assert "duplicate" in t.note


def test_finished_frees_and_moves_to_done() -> None:
    r = running(state="running")
    t = on_lifecycle(life("finished"), r, max_retries=3, now=NOW)
    assert t.running == {"j1": None}
    assert t.pending == {} and t.emit == []
    assert t.done["j1"] == DoneJob(job_id="j1", event_id="ev-j1", status="finished", attempt=0, cluster="c1",
                                   node_id="n1", ended_at=life("finished").event_time.timestamp())  # fmt: skip


def test_failed_requeues_with_the_next_attempt() -> None:
    r = running(attempt=0, state="running")
    t = on_lifecycle(life("failed", reason="OOMKilled"), r, max_retries=3, now=NOW)
    assert t.running == {"j1": None} and t.done == {} and t.emit == []
    p = t.pending["j1"]
    assert p is not None
    assert p.attempt == 1
    assert p.job == r.job
    assert p.submit_ts == r.submit_ts  # the original submission time is kept
    # queued since the report's time, not since the worker read it (a backlog after a restart: found by review)
    assert p.queued_ts == life("failed").event_time.timestamp() < NOW
    ahead = on_lifecycle(life("failed"), r, max_retries=3, now=life("failed").event_time.timestamp() - 30)
    assert ahead.pending["j1"].queued_ts == life("failed").event_time.timestamp() - 30  # a clock ahead: now
    behind = r.model_copy(update={"reserved_ts": life("failed").event_time.timestamp() + 600})  # a clock behind:
    assert on_lifecycle(life("failed"), behind, max_retries=3, now=NOW).pending["j1"].queued_ts == behind.reserved_ts


def test_failed_retries_until_max_retries_then_gives_up() -> None:
    max_retries = 2
    attempt, failures, outcomes = 0, 0, []
    while len(outcomes) < 10:
        t = on_lifecycle(life("failed", attempt=attempt, reason="exit 1"),
                         running(attempt=attempt, failures=failures), max_retries=max_retries, now=NOW)  # fmt: skip
        if t.pending:
            outcomes.append("requeued")
            attempt, failures = t.pending["j1"].attempt, t.pending["j1"].failures
            continue
        outcomes.append("gave up")
        break
    # the first run plus max_retries retries, then it gives up
    assert outcomes == ["requeued", "requeued", "gave up"]
    assert t.running == {"j1": None} and t.pending == {}
    d = t.done["j1"]
    assert d is not None and d.status == "rejected" and d.attempt == 3
    assert d.reason == "gave up after 3 failed attempt(s) (max_retries=2); last: failed: exit 1"
    assert len(t.emit) == 1
    n = t.emit[0]
    assert (n.state, n.job_id, n.cluster, n.attempt, n.reason) == ("rejected", "j1", "c1", 3, d.reason)
    # the same report handled again (redelivered, restored) publishes the same notice
    cause = life("failed", attempt=attempt, reason="exit 1")
    first = on_lifecycle(cause, running(attempt=attempt, failures=failures), max_retries=max_retries, now=NOW)
    again = on_lifecycle(cause, running(attempt=attempt, failures=failures), max_retries=max_retries, now=NOW + 5)
    assert first.emit == again.emit and first.emit[0].event_time == cause.event_time
    assert first.emit[0].event_id == derived_event_id(cause.event_id, "rejected")


def test_give_up_without_a_reason_says_so() -> None:
    t = on_lifecycle(life("failed", reason=""), running(), max_retries=0, now=NOW)
    assert t.done["j1"].reason == "gave up after 1 failed attempt(s) (max_retries=0); last: failed: no reason given"


def test_a_give_up_or_a_rejection_notice_fits_the_wire_whatever_the_reason() -> None:
    """An agent's reason may fill the wire's 4 KiB, and a decision's reason is unbounded (a DAG gate's named
    every parent): the notice built from either was refused, so the report was dead-lettered and the job
    left running for ever, or its cluster's every step failed (found by review)."""
    from scheduling.events import MAX_TEXT

    t = on_lifecycle(life("failed", reason="x" * MAX_TEXT), running(), max_retries=0, now=NOW)
    assert t.done["j1"].status == "rejected" and len(t.emit[0].reason) == MAX_TEXT  # type: ignore[union-attr]
    assert t.emit[0].reason.startswith("gave up after 1 failed attempt(s)") and "characters cut" in t.emit[0].reason
    t = on_decision(decision("rejected", node_id=None, reason="waiting on " + "p, " * 3000), pending())
    assert t.done["j1"].status == "rejected" and len(t.emit[0].reason) == MAX_TEXT  # type: ignore[union-attr]


def test_preempted_requeues_without_counting_a_retry() -> None:
    # max_retries=0: a failure gives up at once, a preemption still re-queues
    t = on_lifecycle(life("preempted", reason="higher priority job"), running(state="running"),
                     max_retries=0, now=NOW)  # fmt: skip
    assert t.running == {"j1": None} and t.done == {} and t.emit == []
    p = t.pending["j1"]
    assert p is not None and p.attempt == 1 and p.queued_ts == life("preempted").event_time.timestamp()


def test_a_requeued_job_keeps_the_service_it_received_across_its_attempts() -> None:
    """2D-LAS ranks by it (found by review: the worker never kept it, and its las was FIFO): rate × seconds
    run per ended run (a 2-GPU job here), carried by the next placement, and 0 for a run that never started."""
    j = job(num_gpu=2, gpu_milli=1000)
    first = on_decision(decision(gpus=(0, 1)), pending(j=j)).running["j1"]
    assert first is not None and first.attained == 0.0
    ran = first.model_copy(update={"state": "running", "started_ts": life("started").event_time.timestamp() - 100})
    back = on_lifecycle(life("preempted"), ran, max_retries=3, now=NOW).pending["j1"]
    assert back is not None and back.attained == 200.0  # 2 GPUs × 100 s
    second = on_decision(decision(attempt=1, gpus=(0, 1)), back).running["j1"]
    assert second is not None and second.attained == 200.0
    ran = second.model_copy(update={"state": "running", "started_ts": life("started").event_time.timestamp() - 50})
    again = on_lifecycle(life("failed", attempt=1), ran, max_retries=3, now=NOW).pending["j1"]
    assert again is not None and again.attempt == 2 and again.attained == 300.0
    never = on_decision(decision(attempt=2, gpus=(0, 1)), again).running["j1"]
    assert on_lifecycle(life("timed_out", attempt=2), never, max_retries=3, now=NOW).pending["j1"].attained == 300.0


def test_preemption_does_not_use_up_the_retry_budget() -> None:
    # max_retries=1 allows one retry after a failure; a preemption before it must not count
    t = on_lifecycle(life("preempted", attempt=0), running(attempt=0, state="running"), max_retries=1, now=NOW)
    assert t.pending["j1"].attempt == 1
    t = on_lifecycle(life("failed", attempt=1, reason="exit 1"), running(attempt=1, state="running"),
                     max_retries=1, now=NOW)  # fmt: skip
    assert t.done == {}, "gave up after one failure although one retry is allowed"
    assert t.pending["j1"] is not None


def test_a_job_preempted_as_often_as_the_wire_allows_attempts_is_given_up() -> None:
    """Preemptions are not charged, but the attempt number is bounded on the wire: the attempt after the
    last one every decision record could carry was decided anyway, and each step of its cluster failed."""
    from scheduling.events import MAX_ATTEMPT

    last = running(attempt=MAX_ATTEMPT, state="running")
    t = on_lifecycle(life("preempted", attempt=MAX_ATTEMPT, reason="agent restarted"), last, max_retries=3, now=NOW)
    assert t.pending == {} and t.running == {"j1": None}
    assert t.done["j1"].status == "rejected"  # type: ignore[union-attr]
    assert t.done["j1"].reason == (f"gave up after {MAX_ATTEMPT + 1} attempts (the most a job may have: "  # type: ignore[union-attr]
                                   f"{MAX_ATTEMPT}); last: preempted: agent restarted")  # fmt: skip
    [notice] = t.emit
    assert notice.state == "rejected"
    ok = on_lifecycle(life("preempted", attempt=MAX_ATTEMPT - 1), running(attempt=MAX_ATTEMPT - 1, state="running"),
                      max_retries=3, now=NOW)  # fmt: skip
    assert ok.pending["j1"].attempt == MAX_ATTEMPT  # type: ignore[union-attr]


def test_timed_out_reserved_job_is_requeued() -> None:
    t = on_lifecycle(life("timed_out", reason="placement not confirmed"), running(state="reserved"),
                     max_retries=3, now=NOW)  # fmt: skip
    assert t.running == {"j1": None} and t.done == {} and t.emit == []
    p = t.pending["j1"]
    assert p is not None and p.attempt == 1


def test_timed_out_racing_after_started_keeps_it_running() -> None:
    t = on_lifecycle(life("timed_out"), running(state="running"), max_retries=3, now=NOW)
    assert_noop(t)
    assert "raced" in t.note


@pytest.mark.parametrize("state", ["started", "finished", "failed", "preempted", "timed_out"])
def test_lifecycle_with_a_mismatched_decision_id_is_ignored(state: str) -> None:
    # (a 'finished' of the attempt before one that has not started finishes the job: the test above)
    r = running(attempt=1, state="running" if state == "finished" else "reserved")
    # the agent reports on attempt 0's placement, which this job no longer holds
    t = on_lifecycle(life(state, attempt=0, decision_id=decision_id_for("j1", 0, "ev-j1")), r, max_retries=3, now=NOW)
    assert_noop(t)
    assert "stale" in t.note


@pytest.mark.parametrize("state", ["started", "finished", "failed"])
def test_lifecycle_for_a_job_not_running_is_ignored(state: str) -> None:
    assert_noop(on_lifecycle(life(state), None, max_retries=3, now=NOW))


def test_rejected_notice_coming_back_only_archives() -> None:
    assert_noop(on_lifecycle(life("rejected", reason="gave up"), running(), max_retries=3, now=NOW))


def test_full_happy_path_submit_place_start_finish() -> None:
    tables: dict[str, object] = {}
    ev = job()
    t = on_submitted(ev, None, now=NOW)
    tables.update(t.pending)
    t = on_decision(decision(), tables["j1"])
    assert t.pending["j1"] is None
    r = t.running["j1"]
    t = on_lifecycle(life("started"), r, max_retries=3, now=NOW)
    r = t.running["j1"]
    t = on_lifecycle(life("finished"), r, max_retries=3, now=NOW)
    d = t.done["j1"]
    # a redelivery of the original submission after the job finished stays a no-op
    assert_noop(on_submitted(ev, d, now=NOW + 100))


def test_agent_report_that_overtakes_the_decision_applies_the_placement() -> None:
    # started arrives before the worker has seen its own decision come back
    p = pending(0, job(num_gpu=1, gpu_milli=1000))
    ev = JobLifecycle(job_id="j1", cluster="c1", state="started", attempt=0, decision_id=decision_id_for("j1", 0, "ev-j1"),
                      node_id="n7", gpu_indices=[2])  # fmt: skip
    t = on_lifecycle(ev, None, pending=p, max_retries=3, now=NOW)
    assert t.pending == {"j1": None}
    r = t.running["j1"]
    assert r is not None and (r.state, r.node_id, r.gpu_indices, r.attempt) == ("running", "n7", [2], 0)
    # the decision that arrives afterwards is stale: the job is no longer pending
    assert on_decision(decision(attempt=0, node_id="n7", gpus=(2,)), None).note.startswith("stale")


def test_finished_that_overtakes_the_decision_finishes_the_job() -> None:
    ev = JobLifecycle(job_id="j1", cluster="c1", state="finished", attempt=0, decision_id=decision_id_for("j1", 0, "ev-j1"),
                      node_id="n7")  # fmt: skip
    t = on_lifecycle(ev, None, pending=pending(0), max_retries=3, now=NOW)
    assert t.pending == {"j1": None} and t.running == {"j1": None}
    assert t.done["j1"] is not None and t.done["j1"].status == "finished"


def test_report_of_another_attempt_does_not_adopt() -> None:
    ev = JobLifecycle(job_id="j1", cluster="c1", state="started", attempt=0, decision_id=decision_id_for("j1", 0, "ev-j1"),
                      node_id="n7")  # fmt: skip
    t = on_lifecycle(ev, None, pending=pending(1), max_retries=3, now=NOW)
    assert t.pending == {} and t.running == {} and t.note.startswith("stale")


def test_a_placement_that_starts_after_it_was_requeued_is_fenced() -> None:
    # attempt 0 timed out and the job was re-queued; then attempt 0's agent reports started
    t = on_lifecycle(life("started", attempt=0, node_id="n3"), None, pending=pending(1), max_retries=3, now=NOW)
    assert t.pending == {} and t.running == {} and t.note == "stale started: fenced"
    (fence,) = t.commands
    assert (fence.kind, fence.job_id, fence.node_id, fence.target_decision_id) == (
        "preempt", "j1", "n3", decision_id_for("j1", 0, "ev-j1"))


def test_a_started_read_again_after_its_run_finished_is_not_fenced_and_any_other_start_is() -> None:
    """After a restart the lifecycle partition is read again from its committed offset, which can lag what
    was handled: the ``started`` of a job that has finished since was fenced as a late start (601 fences of
    1,000 jobs in a chaos run). Not the same attempt on another node, nor one stamped after the run ended."""
    run = running(state="running", node_id="n1")
    started, finished = life("started"), life("finished").model_copy(update={"event_time": T0 + timedelta(seconds=30)})
    done = on_lifecycle(finished, run.model_copy(update={"started_ts": started.event_time.timestamp()}),
                        max_retries=3, now=NOW).done["j1"]  # fmt: skip
    assert done is not None and (done.node_id, done.ended_at) == ("n1", finished.event_time.timestamp())
    t = on_lifecycle(started, None, done=done, max_retries=3, now=NOW)
    assert t.commands == [] and t.note.startswith("started of a run that has finished") and t.done == {}
    for other in (life("started", node_id="n2"),  # a second execution elsewhere
                  started.model_copy(update={"event_time": T0 + timedelta(seconds=31)}),  # a start after the end
                  life("started", attempt=1)):  # another attempt
        t = on_lifecycle(other, None, done=done, max_retries=3, now=NOW)
        assert t.note == "stale started: fenced" and len(t.commands) == 1, other
    # a record written before the node was kept: fenced, as before
    t = on_lifecycle(started, None, done=done.model_copy(update={"node_id": "", "ended_at": 0.0}), max_retries=3,
                     now=NOW)  # fmt: skip
    assert t.note == "stale started: fenced"


def test_a_finished_of_the_attempt_before_the_current_one_that_has_not_started_finishes_the_job() -> None:
    """The worker moved the job on (its node was lost: its own 'preempted'; or a late 'started') while
    the run went on to the end: the agent's 'finished' comes after. Found by review: it was stale, and
    the completed job was run again."""
    finished = life("finished", attempt=0, node_id="n1")
    t = on_lifecycle(finished, None, pending=pending(attempt=1), max_retries=3, now=NOW)
    assert t.pending == {"j1": None} and t.running == {} and t.commands == []
    assert t.done["j1"] == DoneJob(job_id="j1", event_id="ev-j1", status="finished", attempt=0, cluster="c1",
                                   node_id="n1", ended_at=finished.event_time.timestamp())  # fmt: skip
    placed_again = running(attempt=1, node_id="n2")
    t = on_lifecycle(finished, placed_again, max_retries=3, now=NOW)
    assert t.running == {"j1": None} and t.done["j1"].status == "finished"  # type: ignore[union-attr]
    [fence] = t.commands
    assert (fence.node_id, fence.target_decision_id) == ("n2", placed_again.decision_id)
    # not once the next attempt runs, not for an older attempt, not for a gang member: stale, as before
    for late, now_at in ((finished, running(attempt=1, state="running", node_id="n2")),
                         (finished, running(attempt=2, node_id="n2"))):
        t = on_lifecycle(late, now_at, max_retries=3, now=NOW)
        assert t.done == {} and t.running == {} and t.note.startswith("stale")
    member = pending(attempt=1, j=job(gang_id="g", gang_size=2))
    t = on_lifecycle(finished, None, pending=member, max_retries=3, now=NOW)
    assert t.done == {} and t.pending == {} and t.note.startswith("stale")


def test_reports_of_placements_made_before_the_ids_named_the_submission_are_still_theirs() -> None:
    """An upgrade with jobs in flight: their decisions and reports carry the id of before 2026-12-04 (per job
    and attempt). Found by review: a report overtaking such a decision was fenced instead of applied, and a
    late 'finished' of the attempt before the current one was stale, so the completed job ran again."""
    import hashlib

    legacy = hashlib.sha1(b"j1#0").hexdigest()[:20]
    started = life("started", attempt=0, decision_id=legacy, node_id="n7")
    t = on_lifecycle(started, None, pending=pending(0), max_retries=3, now=NOW)
    assert t.running["j1"] is not None and t.running["j1"].decision_id == legacy and not t.commands
    finished = life("finished", attempt=0, decision_id=legacy, node_id="n1")
    t = on_lifecycle(finished, None, pending=pending(attempt=1), max_retries=3, now=NOW)
    assert t.done["j1"] is not None and t.done["j1"].status == "finished"
    other = life("finished", attempt=0, decision_id=hashlib.sha1(b"j2#0").hexdigest()[:20], node_id="n1")
    assert on_lifecycle(other, None, pending=pending(attempt=1), max_retries=3, now=NOW).done == {}


def test_a_report_must_name_its_decision() -> None:
    """An agent's report without the command's decision_id is refused on the wire, with the reason
    (found by review: it was taken for a stale report and ignored, and the job re-placed at every
    confirmation timeout with nothing said). The worker's rejection notice names none."""
    for state in ("started", "finished", "failed", "preempted", "timed_out"):
        with pytest.raises(ValueError, match=f"a '{state}' report needs the decision_id"):
            decode("jobs.lifecycle", life(state).model_dump_json(exclude={"decision_id"}).encode())
    assert decode("jobs.lifecycle", JobLifecycle(job_id="j1", state="rejected").to_bytes()).decision_id is None


def test_a_gang_member_leaving_fences_the_other_placed_members() -> None:
    from streams.state import gang_fences

    def member(jid: str, gang: str | None = "g") -> RunningJob:
        j = JobSubmitted(job_id=jid, cluster="c1", gang_id=gang, gang_size=3 if gang else 1)
        return RunningJob(job=j, attempt=0, submit_ts=0, decision_id=f"d-{jid}", node_id=f"n-{jid}",
                          gpu_indices=[], reserved_ts=0)  # fmt: skip

    a, b, c, other = member("a"), member("b"), member("c"), member("x", gang=None)
    fences = gang_fences(a.job, [a, b, c, other], "left the gang: failed")
    assert [(f.job_id, f.node_id, f.target_decision_id) for f in fences] == [("b", "n-b", "d-b"), ("c", "n-c", "d-c")]
    assert all(f.reason == "gang g: member a left the gang: failed" for f in fences)
    assert gang_fences(other.job, [a, b], "failed") == []


def test_a_member_given_up_marks_its_gang() -> None:
    j = JobSubmitted(job_id="j1", cluster="c1", gang_id="g", gang_size=2)
    r = RunningJob(job=j, attempt=0, submit_ts=0, decision_id=decision_id_for("j1", 0, "ev-j1"), node_id="n1",
                   gpu_indices=[], reserved_ts=0)  # fmt: skip
    t = on_lifecycle(life("failed", reason="exit 1"), r, max_retries=0, now=NOW)
    assert t.done["j1"] is not None and t.done["j1"].gang_id == "g" and t.done["j1"].status == "rejected"


def test_a_second_execution_of_a_running_placement_on_another_node_is_fenced_and_its_reports_ignored() -> None:
    """Found by review: the same decision id executed on two nodes (re-decided elsewhere after a
    restart, both commands executed); the second 'started' was a duplicate no-op, so the job ran
    twice and that node's use was never counted, and its end would have re-queued the job."""
    r = running(state="running", node_id="n1")
    t = on_lifecycle(life("started", node_id="n2"), r, max_retries=3, now=NOW)
    assert t.pending == {} and t.running == {} and t.done == {} and "fenced" in t.note
    [fence] = t.commands
    assert (fence.node_id, fence.target_decision_id) == ("n2", r.decision_id)
    for state in ("preempted", "failed", "finished"):  # the fenced run's end: the job still runs on n1
        assert_noop(on_lifecycle(life(state, node_id="n2"), r, max_retries=3, now=NOW))
    assert on_lifecycle(life("finished", node_id="n1"), r, max_retries=3, now=NOW).done["j1"].status == "finished"
