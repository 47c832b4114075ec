from __future__ import annotations

import pytest
from storage_scenario import T0, at, scenario

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, decision_id_for
from storage.client import ArchiveClient
from storage.queries import explain, reconcile, run_sql, summary
from storage.writer import ArchiveWriter


def dec(job: str, attempt: int, s: float, node: str) -> DecisionRecord:
    """A placed decision of ``job``'s ``attempt`` at ``s`` seconds (the reconcile and explain tests' rows)."""
    did = decision_id_for(job, attempt, "sub")
    return DecisionRecord(event_id=did, decision_id=did, event_time=at(s), job_id=job, attempt=attempt,
                          outcome="placed", node_id=node, policy="best-fit", latency_ms=1.0)  # fmt: skip


def life(job: str, attempt: int, state: str, s: float, node: str | None, reason: str = "", **kw: object) -> JobLifecycle:
    """A lifecycle report of ``job``'s ``attempt`` at ``s`` seconds; without a node, no decision (a notice)."""
    return JobLifecycle(event_time=at(s), job_id=job, decision_id=decision_id_for(job, attempt, "sub") if node else None,
                        state=state, node_id=node, attempt=attempt, reason=reason, **kw)  # type: ignore[arg-type]  # fmt: skip


def write_runs(client: ArchiveClient, jobs: str, placed: tuple[tuple[str, int, float, str], ...],
               reports: list[JobLifecycle]) -> None:  # fmt: skip
    """The reconcile tests' archive: ``jobs`` submitted at 0 s, their ``placed`` decisions (job, attempt,
    seconds, node) and the lifecycle ``reports``, in that order on partition 0."""
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_time=at(0), job_id=j, cpu_milli=1000) for j in jobs],
            [(0, i) for i in range(len(jobs))])  # fmt: skip
    w.write("decisions", [dec(*p) for p in placed], [(0, i) for i in range(len(placed))])
    w.write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])


@pytest.fixture
def loaded(client: ArchiveClient) -> ArchiveClient:
    w = ArchiveWriter(client)
    for table, events in scenario().items():
        w.write(table, events, [(0, i) for i in range(len(events))])
    # redeliver everything once more (a crash between insert and offset commit)
    for table, events in scenario().items():
        w.write(table, events, [(0, i) for i in range(len(events))])
    return client


def test_summary(loaded: ArchiveClient) -> None:
    s = summary(loaded)
    assert (s.submitted, s.placed, s.finished, s.failed, s.rejected, s.running) == (5, 2, 1, 0, 1, 1)
    assert s.rejected_by_reason == {"gave up after 3 retries: no node has 8 GPUs": 1}
    assert s.unschedulable_by_reason == {"insufficient GPU: 4 GPUs on one node needed": 1}
    assert s.jct_mean_s == pytest.approx(65.0)
    assert s.jct_p95_s == pytest.approx(65.0)
    assert s.queueing_delay_mean_s == pytest.approx(5.0)
    assert s.decision_latency_p50_ms == pytest.approx(30.0)
    assert s.decision_latency_p99_ms == pytest.approx(39.8)
    # A holds 1 of 4 GPUs over [5, 65), D 1 from 8 on (still running at the archive's last event: a
    # telemetry report at 70; the last lifecycle event, 65, ended it before)
    g = [(x.bucket_start, x.capacity_milli) for x in s.gpu_allocation]
    assert g == [(T0.timestamp(), 4000), (at(60).timestamp(), 4000)]
    assert s.gpu_allocation[0].ratio == pytest.approx((55 + 52) * 1000 / 60 / 4000)
    assert s.gpu_allocation[1].ratio == pytest.approx((5 + 10) * 1000 / 10 / 4000)
    assert s.gpu_allocation_mean == pytest.approx((55 + 52 + 5 + 10) * 1000 / 70 / 4000)  # the run ends at 70
    assert s.deadletters_by_reason == {"bad json": 1, "message too large": 1}


def test_a_job_that_finished_after_a_give_up_notice_counts_as_finished_only(client: ArchiveClient) -> None:
    """Found by review: job A finished and also had the worker's give-up notice (read before its late finish);
    the summary counted it as finished and as rejected, where the job metrics count it once."""
    events = scenario()
    events["jobs_lifecycle"].append(JobLifecycle(event_id="l-a-rej", event_time=at(60), job_id="A", state="rejected",
                                                 reason="gave up: placement never confirmed"))  # fmt: skip
    w = ArchiveWriter(client)
    for table, rows in events.items():
        w.write(table, rows, [(0, i) for i in range(len(rows))])
    s = summary(client)
    assert (s.finished, s.rejected) == (1, 1)
    assert s.rejected_by_reason == {"gave up after 3 retries: no node has 8 GPUs": 1}


def test_the_reports_of_a_job_never_accepted_count_nowhere_in_the_summary(client: ArchiveClient) -> None:
    """Found by review: X has lifecycle reports (started, failed, started) but no accepted submission; the
    summary counted it as still running and as a failed attempt, while the job metrics know no such job."""
    events = scenario()
    events["jobs_lifecycle"] += [life("X", 0, "started", 10, "n1"), life("X", 0, "failed", 12, "n1"),
                                 life("X", 1, "started", 14, "n1")]  # fmt: skip
    w = ArchiveWriter(client)
    for table, rows in events.items():
        w.write(table, rows, [(0, i) for i in range(len(rows))])
    s = summary(client)
    assert (s.submitted, s.placed, s.finished, s.failed, s.rejected, s.running) == (5, 2, 1, 0, 1, 1)


def test_explain_a_job_that_finished_after_a_give_up_notice_says_it_finished(client: ArchiveClient) -> None:
    """Found by review: A finished (50 s) and the worker's give-up notice came after it (60 s); the job
    metrics count it as finished, explain said "rejected"."""
    write_runs(client, "A", (("A", 0, 1, "n1"),), [life("A", 0, "started", 2, "n1"), life("A", 0, "finished", 50, "n1"),
                                                   life("A", 1, "rejected", 60, None, reason="gave up")])  # fmt: skip
    answer = explain(client, "A").answer
    assert "finished on node n1" in answer and "rejected" not in answer, answer


def test_summary_empty(client: ArchiveClient) -> None:
    s = summary(client)
    assert s.submitted == 0 and s.jct_mean_s is None and s.decision_latency_p99_ms is None
    assert s.gpu_allocation == [] and s.deadletters_by_reason == {}


def test_redelivery_counts_once(loaded: ArchiveClient) -> None:
    _, [(raw,)] = loaded.query_rows("SELECT count() FROM jobs_submitted")
    _, [(final,)] = loaded.query_rows("SELECT count() FROM jobs_submitted FINAL")
    assert final == 5 and raw in (5, 10)  # raw depends on whether a merge already ran
    loaded.command("OPTIMIZE TABLE jobs_submitted FINAL")
    _, [(raw,)] = loaded.query_rows("SELECT count() FROM jobs_submitted")
    assert raw == 5


def test_reconcile(loaded: ArchiveClient) -> None:
    r = reconcile(loaded)
    # C never decided, F only unschedulable so far: neither finished, running nor rejected
    assert r.unaccounted == [("default", "C"), ("default", "F")]
    assert r.placed_twice == [] and r.started_twice == []
    assert not r.ok


def test_reconcile_double_placement_and_start(loaded: ArchiveClient) -> None:
    w = ArchiveWriter(loaded)
    # the same attempt of A placed again, on another node, under another decision id
    w.write(
        "decisions",
        [
            DecisionRecord(
                event_id="rogue",
                decision_id="rogue",
                event_time=at(9),
                job_id="A",
                outcome="placed",
                node_id="n2",
                policy="best-fit",
                latency_ms=1.0,
            )
        ],
    )
    w.write(
        "jobs_lifecycle",
        [JobLifecycle(event_id="l-d-2", event_time=at(9), job_id="D", decision_id="d", state="started", node_id="n2")],
    )
    r = reconcile(loaded)
    assert r.placed_twice == [("default", "A", 0)]
    assert r.started_twice == [("default", "D", 0)]


def test_reconcile_two_attempts_of_one_job_running_at_once(client: ArchiveClient) -> None:
    """X's attempt 0 timed out before it started; the retry went to n2, then attempt 0 started late on
    n1 (the worker fences it) and ran beside it. Y, preempted and retried, ran one attempt at a time;
    Z's attempt 0 started after its retry had, and never ended. (Found by review: reconciled, since
    each check looked within one attempt.)"""

    reports = [life("X", 0, "timed_out", 31, "n1"), life("X", 0, "started", 33, "n1"),
               life("X", 1, "started", 34, "n2"), life("X", 0, "finished", 35, "n1"),
               life("X", 1, "finished", 90, "n2"),
               life("Y", 0, "started", 2, "n1"), life("Y", 0, "preempted", 50, "n1"),
               life("Y", 1, "started", 53, "n2"), life("Y", 1, "finished", 90, "n2"),
               life("Z", 0, "timed_out", 31, "n1"), life("Z", 1, "started", 33, "n2"),
               life("Z", 0, "started", 34, "n1"), life("Z", 1, "finished", 90, "n2")]  # fmt: skip
    write_runs(client, "XYZ", (("X", 0, 1, "n1"), ("X", 1, 32, "n2"), ("Y", 0, 1, "n1"), ("Y", 1, 52, "n2"),
                               ("Z", 0, 1, "n1"), ("Z", 1, 32, "n2")), reports)
    r = reconcile(client)
    assert r.ran_twice == [("default", "X", 1), ("default", "Z", 1)] and not r.ok
    assert r.unaccounted == [] and r.placed_twice == [] and r.started_twice == []


def test_reconcile_a_lost_nodes_run_that_went_on_beside_the_retry(client: ArchiveClient) -> None:
    """Each job's node n1 was lost: the worker preempted attempt 0 itself (streams/lost_nodes.py) and fenced
    it, and the retry started on n2. J's and M's agents, still alive, ran attempt 0 on after the retry had
    started: J's answered the fence (echoing its reason), M's run finished first. K's agent was dead (the
    worker's report is the only end); L's answered the fence before the retry started. (Found by review: the
    worker's own report ended the run, and J and M were reconciled.)"""
    lost = "node n1 silent (no report from its agent), marked unhealthy for 61s (SEMSCHED_NODE_LOST=60)"

    w = ArchiveWriter(client)
    reports = []
    for job, agents_end in (("J", ("preempted", 90, lost)), ("M", ("finished", 90, "")), ("K", None),
                            ("L", ("preempted", 71, lost))):  # fmt: skip
        reports += [life(job, 0, "started", 2, "n1"), life(job, 0, "preempted", 70, "n1", lost)]
        if agents_end is not None and agents_end[1] < 72:
            reports.append(life(job, 0, agents_end[0], agents_end[1], "n1", agents_end[2]))
        reports.append(life(job, 1, "started", 72, "n2"))
        if agents_end is not None and agents_end[1] > 72:
            reports.append(life(job, 0, agents_end[0], agents_end[1], "n1", agents_end[2]))
        reports.append(life(job, 1, "finished", 120, "n2"))
    w.write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])
    r = reconcile(client)
    assert r.ran_twice == [("default", "J", 1), ("default", "M", 1)]
    assert r.started_twice == [] and r.ran_after_done == []


def test_reconcile_takes_a_restarted_agents_report_of_a_lost_run_for_no_end(client: ArchiveClient) -> None:
    """n1 died: the worker preempted J's attempt 0 itself and the retry ran on n2; an hour later n1's agents
    came back and reported the lost run ``preempted`` (AGENT_RESTART_LOST_REASON). That is not when the run
    ended (found by review of the ran-twice change: the run lasted an hour, and the retry "ran twice")."""
    from scheduling.events import AGENT_RESTART_LOST_REASON, node_lost_reason

    lost = node_lost_reason("n1", "silent (no report from its agent), marked", 61, 60)
    reports = [life("J", 0, "started", 2, "n1"), life("J", 0, "preempted", 70, "n1", lost), life("J", 1, "started", 72, "n2"),
               life("J", 1, "finished", 120, "n2"), life("J", 0, "preempted", 3600, "n1", AGENT_RESTART_LOST_REASON)]  # fmt: skip
    ArchiveWriter(client).write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])
    assert reconcile(client).ran_twice == []


def test_reconcile_takes_a_gang_members_earlier_finish_for_no_end_of_the_job(client: ArchiveClient) -> None:
    """The worker places a whole gang again when a member's node is lost, even if that member's agent then
    reports its earlier attempt ``finished`` (streams/state.py, "not for a gang member"): its next attempt's
    run is intended (found by review of ran_after_done: the demo would exit "NOT reconciled")."""
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_time=at(0), job_id=j, gang_id="g", gang_size=2) for j in "AB"] +
            [JobSubmitted(event_time=at(0), job_id="S")], [(0, 1), (0, 2), (0, 3)])  # fmt: skip

    reports = []
    for job in ("A", "S"):  # A a gang member, S a job on its own: both finished attempt 0, then ran attempt 1
        reports += [life(job, 0, "started", 2, "n1"), life(job, 0, "finished", 80, "n1"), life(job, 1, "started", 90, "n2"),
                    life(job, 1, "finished", 120, "n2")]  # fmt: skip
    w.write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])
    assert reconcile(client).ran_after_done == [("default", "S", 1)]


def test_reconcile_an_attempt_that_started_after_the_job_was_done(client: ArchiveClient) -> None:
    """R's attempt 0 timed out, then started late and finished (the worker took the finish); the step that
    had decided attempt 1 sent its command anyway (daa637f's bug) and it ran again on n2. G failed and was
    given up (the worker's rejection notice), yet its attempt 1 ran. Y, failed and retried, ran one attempt
    after the other. (Found by review: R and G were reconciled.)"""
    from rich.console import Console

    from ops.summary_view import print_reconcile

    reports = [life("R", 0, "timed_out", 31, "n1"), life("R", 0, "started", 32, "n1"),
               life("R", 0, "finished", 40, "n1"), life("R", 1, "started", 42, "n2"),
               life("R", 1, "finished", 60, "n2"),
               life("G", 0, "started", 2, "n1"), life("G", 0, "failed", 5, "n1", exit_code=1),
               life("G", 1, "rejected", 5, None, reason="gave up after 1 failed attempt(s) (max_retries=0)"),
               life("G", 1, "started", 7, "n2"), life("G", 1, "finished", 9, "n2"),
               life("Y", 0, "started", 2, "n1"), life("Y", 0, "failed", 5, "n1", exit_code=1),
               life("Y", 1, "started", 7, "n2"), life("Y", 1, "finished", 9, "n2")]  # fmt: skip
    write_runs(client, "RGY", (("R", 0, 1, "n1"), ("R", 1, 41, "n2"), ("G", 0, 1, "n1"), ("G", 1, 6, "n2"),
                               ("Y", 0, 1, "n1"), ("Y", 1, 6, "n2")), reports)
    r = reconcile(client)
    assert r.ran_after_done == [("default", "G", 1), ("default", "R", 1)] and not r.ok
    assert r.unaccounted == [] and r.placed_twice == [] and r.started_twice == [] and r.ran_twice == []
    console = Console(record=True, width=200)
    assert not print_reconcile(console, r, submitted=3)
    assert "ran after it was done (finished or rejected): 2: default/G attempt 1, default/R attempt 1" in console.export_text()


def test_re_decision_same_attempt_is_one_applied_decision(loaded: ArchiveClient) -> None:
    """A worker restart re-decides D's attempt 0 (same decision id): two records in the archive (0017:
    one row per record), one decision as applied."""
    did = decision_id_for("D", 0, "sub")
    again = DecisionRecord(
        event_id=did,
        decision_id=did,
        event_time=at(12),
        job_id="D",
        outcome="placed",
        node_id="n1",
        gpu_indices=[1],
        policy="best-fit",
        latency_ms=45.0,
    )
    ArchiveWriter(loaded).write("decisions", [again])
    _, [(n,)] = loaded.query_rows("SELECT count() FROM decisions_applied WHERE job_id = 'D'")
    assert n == 1 and loaded.query_rows("SELECT count() FROM decisions FINAL WHERE job_id = 'D'")[1] == [(2,)]
    assert summary(loaded).placed == 2
    assert reconcile(loaded).placed_twice == []


def test_explain_finished(loaded: ArchiveClient) -> None:
    e = explain(loaded, "A")
    assert [x.source for x in e.timeline] == ["submitted", "decision", "action", "lifecycle", "lifecycle"]
    assert [x.time for x in e.timeline] == sorted(x.time for x in e.timeline)
    assert e.decisions[0]["candidates"][0]["node_id"] == "n1"
    assert "finished on node n1" in e.answer
    assert "placed on node n1 by policy best-fit because tightest GPU fit" in e.answer
    assert "JCT 65.0s" in e.answer


def test_explain_pending_and_rejected(loaded: ArchiveClient) -> None:
    f = explain(loaded, "F")
    assert f.answer.startswith("Job F is pending because insufficient GPU: 4 GPUs on one node needed")
    c = explain(loaded, "C")
    assert "no scheduling decision" in c.answer and len(c.timeline) == 1
    b = explain(loaded, "B")
    assert "rejected" in b.answer and "no node has 8 GPUs" in b.answer
    d = explain(loaded, "D")
    assert "running on node n1" in d.answer
    assert "not in the archive" in explain(loaded, "nope").answer


def test_explain_reads_where_the_job_stands_not_the_last_report_by_id(client: ArchiveClient) -> None:
    """G gave up: its rejection notice shares the failure's millisecond and sorts before it by event id.
    R's timeout raced its start: the worker keeps the run. (Found by review: "waiting to be re-placed".)"""
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=T0, job_id=j) for j in "GR"], [(0, 0), (0, 1)])
    w.write("decisions", [DecisionRecord(event_id=decision_id_for(j, 0, "sub"), decision_id=decision_id_for(j, 0, "sub"),
                                         event_time=at(1), job_id=j, outcome="placed", node_id="n1", policy="best-fit",
                                         latency_ms=1.0) for j in "GR"], [(0, 0), (0, 1)])  # fmt: skip
    reports = [JobLifecycle(event_id="g-1", event_time=at(2), job_id="G", state="started", node_id="n1",
                            decision_id=decision_id_for("G", 0, "sub")),
               JobLifecycle(event_id="z-failed", event_time=at(10), job_id="G", state="failed", node_id="n1",
                            exit_code=1, decision_id=decision_id_for("G", 0, "sub")),
               JobLifecycle(event_id="a-notice", event_time=at(10), job_id="G", state="rejected",
                            reason="gave up after 0 retries; last: failed"),
               JobLifecycle(event_id="r-1", event_time=at(30.5), job_id="R", state="started", node_id="n1",
                            decision_id=decision_id_for("R", 0, "sub")),
               JobLifecycle(event_id="r-2", event_time=at(31), job_id="R", state="timed_out", node_id="n1",
                            decision_id=decision_id_for("R", 0, "sub"))]  # fmt: skip
    w.write("jobs_lifecycle", reports, [(0, i) for i in range(len(reports))])
    assert explain(client, "G").answer.startswith("Job G was rejected at")
    assert explain(client, "R").answer.startswith("Job R is running on node n1")
    # a timeout read before the attempt's start: the worker took the timeout and re-queued the job (the start
    # came too late, fenced). T's timeout is stamped after its start (another clock); U's in the usual order of
    # clocks (found by the review of the change: the last in event-time order, U's start, read as running)
    for k, (job, timeout_at, start_at) in enumerate((("T", 31.0, 30.5), ("U", 31.0, 31.5))):
        did = decision_id_for(job, 0, "sub")
        w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{job}", event_time=T0, job_id=job)], [(0, 2 + k)])
        w.write("decisions", [DecisionRecord(event_id=did, decision_id=did, event_time=at(1), job_id=job, outcome="placed",
                                             node_id="n1", policy="best-fit", latency_ms=1.0)], [(0, 2 + k)])  # fmt: skip
        w.write("jobs_lifecycle", [JobLifecycle(event_id=f"{job}-{state}", event_time=at(t), job_id=job, state=state,
                                                node_id="n1", decision_id=did)
                                   for state, t in (("timed_out", timeout_at), ("started", start_at))],
                [(0, 10 + 2 * k), (0, 11 + 2 * k)])  # fmt: skip
        assert explain(client, job).answer.startswith(f"Job {job} timed out on node n1")


def test_explain_reads_the_current_attempt_not_a_superseded_ones_late_report(client: ArchiveClient) -> None:
    """L's attempt 0 timed out and its retry runs on n2; attempt 0 started late on n1, was fenced, and its
    agent answered ``preempted``. N's node n1 was lost and its retry runs on n2; n1's agent answered the
    fence last. S's attempt 0 finished late, read after the stale decision of attempt 1 (n2; no command).
    (Found by review: L and N were "preempted on node n1, waiting to be re-placed (attempt 1)", and S
    "placed on node n2".)"""

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_time=T0, job_id=j) for j in "LNS"], [(0, i) for i in range(3)])
    decisions = [dec(j, a, s, n) for j, a, s, n in (("L", 0, 1, "n1"), ("L", 1, 32, "n2"), ("N", 0, 1, "n1"),
                                                        ("N", 1, 71, "n2"), ("S", 0, 1, "n1"), ("S", 1, 40.5, "n2"))]
    w.write("decisions", decisions, [(0, i) for i in range(len(decisions))])
    fenced = "superseded placement: it started after the worker had re-queued it"
    lost = "node n1 silent (no report from its agent), marked unhealthy for 61s (SEMSCHED_NODE_LOST=60)"
    reports = [life("L", 0, "timed_out", 31, "n1"), life("L", 1, "started", 33, "n2"),
               life("L", 0, "started", 34, "n1"), life("L", 0, "preempted", 35, "n1", fenced),
               life("N", 0, "started", 2, "n1"), life("N", 0, "preempted", 70, "n1", lost),
               life("N", 1, "started", 72, "n2"), life("N", 0, "preempted", 90, "n1", lost),
               life("S", 0, "timed_out", 31, "n1"), life("S", 0, "started", 32, "n1"),
               life("S", 0, "finished", 41, "n1")]  # fmt: skip
    w.write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])
    assert explain(client, "L").answer.startswith("Job L is running on node n2 since 2026-01-01T00:00:33+00:00; "
                                                  "it was placed on node n2")  # fmt: skip
    assert explain(client, "N").answer.startswith("Job N is running on node n2 since 2026-01-01T00:01:12+00:00; "
                                                  "it was placed on node n2")  # fmt: skip
    assert explain(client, "S").answer.startswith("Job S finished on node n1 at 2026-01-01T00:00:41+00:00 "
                                                  "(JCT 41.0s); it was placed on node n1 by policy best-fit")  # fmt: skip


def test_run_sql(loaded: ArchiveClient) -> None:
    cols, rows = run_sql(loaded, "SELECT job_id, num_gpu FROM jobs_submitted FINAL ORDER BY job_id")
    assert cols == ["job_id", "num_gpu"]
    assert rows == [("A", 1), ("B", 8), ("C", 0), ("D", 1), ("F", 4)]


def test_a_start_and_an_end_in_the_same_millisecond_is_not_running(client: ArchiveClient) -> None:
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s", event_time=T0, job_id="Z")], [(0, 0)])
    # same time; the 'started' event id sorts last, so "the last event" would say running
    w.write("jobs_lifecycle", [JobLifecycle(event_id="b-end", event_time=at(1), job_id="Z", decision_id="d", state="finished"),
                               JobLifecycle(event_id="z-start", event_time=at(1), job_id="Z", decision_id="d", state="started")],
            [(0, 1), (0, 2)])  # fmt: skip
    s = summary(client)
    assert (s.finished, s.running) == (1, 0)
    assert reconcile(client).ok


def test_explain_shows_the_cost_estimators_view_of_a_learned_decision(loaded: ArchiveClient) -> None:
    ArchiveWriter(loaded).write("decisions", [DecisionRecord(
        event_id="g-0", decision_id="g-0", event_time=at(9), job_id="G", outcome="placed", node_id="n2",
        policy="learned", model_version="v3", latency_ms=3.0, predicted_cost=0.25, predicted_run_time_s=7200.0)])  # fmt: skip
    [decision] = [x for x in explain(loaded, "G").timeline if x.source == "decision"]
    assert "ψ: +0.250 GPU fragmentation, expected run time 7,200 s" in decision.text
    assert decision.data["predicted_run_time_s"] == 7200.0
    assert "by policy learned model v3" in explain(loaded, "G").answer


def test_explain_a_fallback_decision_does_not_credit_the_model_that_failed(loaded: ArchiveClient) -> None:
    ArchiveWriter(loaded).write("decisions", [DecisionRecord(
        event_id="h-0", decision_id="h-0", event_time=at(9), job_id="H", outcome="placed", node_id="n2",
        policy="learned", model_version="v3", fallback=True, latency_ms=3.0,
        reason="fgd: highest score 50; triton fell back to fgd: DEADLINE_EXCEEDED")])  # fmt: skip
    answer = explain(loaded, "H").answer
    assert "by policy learned because fgd:" in answer and "(heuristic fallback: model v3 failed)" in answer, answer


def test_explain_a_refused_submission_gives_the_dead_letters_reason(client: ArchiveClient) -> None:
    from scheduling.events import DeadLetter

    w = ArchiveWriter(client)
    refused = DeadLetter.of(JobSubmitted(job_id="big").to_bytes(), "message of 300000 bytes exceeds the 262144-byte limit",
                            topic="jobs.submitted", partition=0, offset=3, key=b"big")  # fmt: skip
    w.write("deadletter", [refused], [(0, 0)])
    e = explain(client, "big")
    assert e.answer.startswith("Job big was never scheduled: its submission was refused at")
    assert "exceeds the 262144-byte limit" in e.answer and [t.source for t in e.timeline] == ["dead letter"]


def test_explain_a_job_known_only_from_lifecycle_reports_says_it_was_never_submitted(client: ArchiveClient) -> None:
    w = ArchiveWriter(client)
    w.write("jobs_lifecycle", [JobLifecycle(event_id="x", event_time=T0, job_id="ghost", decision_id="d", state="finished")], [(0, 0)])
    e = explain(client, "ghost")
    assert e.answer.startswith("Job ghost was never submitted: the archive holds only 1 lifecycle report(s)")


def test_reconcile_counts_a_dead_lettered_submission_as_refused_not_lost(loaded: ArchiveClient) -> None:
    """The archiver archives a submission the worker dead-letters (a clock too far ahead, a job id in
    use): its dead letter names that message, so it was refused with a reason, not lost. A job whose
    first submission was accepted stays unaccounted when a second one of it is refused."""
    from scheduling.events import DeadLetter

    w = ArchiveWriter(loaded)
    ahead = JobSubmitted(event_id="s-g", event_time=at(900), job_id="G")
    again = JobSubmitted(event_id="s-c2", event_time=at(8), job_id="C")  # C's id reused
    w.write("jobs_submitted", [ahead, again], [(1, 40), (1, 41)])
    refused = [DeadLetter.of(ahead.to_bytes(), "event_time is 900 s ahead", topic="jobs.submitted", partition=1,
                             offset=40),
               DeadLetter.of(again.to_bytes(), "job id 'C' was already submitted", topic="jobs.submitted",
                             partition=1, offset=41)]  # fmt: skip
    w.write("deadletter", refused, [(1, 7), (1, 8)])
    assert reconcile(loaded).unaccounted == [("default", "C"), ("default", "F")]
    # the same refused message on another topic's dead letter, or another offset, does not count
    w.write("jobs_submitted", [JobSubmitted(event_id="s-h", event_time=at(9), job_id="H")], [(1, 42)])
    w.write("deadletter", [DeadLetter.of(b"{}", "x", topic="jobs.lifecycle", partition=1, offset=42)], [(1, 9)])
    assert reconcile(loaded).unaccounted == [("default", j) for j in "CFH"]
    # a submission dead-lettered for an internal error is applied again later: still to be accounted for
    w.write("jobs_submitted", [JobSubmitted(event_id="s-i", event_time=at(9), job_id="I")], [(1, 43)])
    w.write("deadletter", [DeadLetter.of(b"{}", "internal error while handling: KeyError: 'x'", topic="jobs.submitted",
                                         partition=1, offset=43)], [(1, 10)])  # fmt: skip
    assert reconcile(loaded).unaccounted == [("default", j) for j in "CFHI"]
