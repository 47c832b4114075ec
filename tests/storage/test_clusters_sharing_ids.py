"""Two clusters that reuse a job id, read apart. A job id is unique only among the clusters one worker
serves (README, "Ids"): clusters a and b, on two workers, may both have a job "job1", and its decision
id (``decision_id_for(job_id, attempt, "sub")``) is then the same in both. The archive's tables are keyed by
cluster; its views and reads grouped and joined by job id (and decision id) alone, so one cluster's
decision hid the other's, b's reports were dropped as "not where it runs" (a's node), b's run time read
a's, and the counts, reconciliation and ``explain`` merged the two jobs (found by review)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inference.training.archive_events import fold_events
from scheduling.events import (
    DeadLetter,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decision_id_for,
)
from storage.client import ArchiveClient
from storage.queries.finished_jobs import finished_jobs
from storage.queries.job_runs import job_runs
from storage.queries.training_events import training_events
from storage.writer import ArchiveWriter

T0 = datetime(2026, 3, 1, tzinfo=UTC)
DID = decision_id_for("job1", 0, "sub")  # the same in both clusters
PARTITION = {"a": 0, "b": 1}
NODE = {"a": "n0", "b": "n1"}  # where each cluster ran its job1 (both clusters have both nodes)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def write_cluster(w: ArchiveWriter, cluster: str, run_s: float | None, *, decided: bool = True) -> None:
    """``cluster``'s nodes n0 and n1 and its job1, submitted at 0 s, placed on :data:`NODE` at 1 s, started at
    2 s and finished ``run_s`` later (``None``: still running; not ``decided``: never decided)."""
    p, node = PARTITION[cluster], NODE[cluster]
    w.write("nodes_telemetry", [NodeTelemetry(event_id=f"t-{cluster}-{n}", event_time=at(-5), node_id=n,
                                              cluster=cluster, source="inventory", cpu_milli=8000, memory_mib=32000,
                                              num_gpu=2, gpu_model="T4") for n in ("n0", "n1")],
            [(p, 0), (p, 1)])  # fmt: skip
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{cluster}", event_time=at(0), job_id="job1", cluster=cluster,
                                            cpu_milli=1000, memory_mib=100, num_gpu=1, gpu_milli=1000)], [(p, 10)])  # fmt: skip
    if not decided:
        return
    w.write("decisions", [DecisionRecord(event_id=DID, decision_id=DID, event_time=at(1), job_id="job1",
                                         cluster=cluster, outcome="placed", node_id=node, gpu_indices=[0],
                                         policy="best-fit", latency_ms=1.0, cpu_milli=1000, memory_mib=100,
                                         gpu_milli_per_gpu=1000, step_id=f"{cluster}:1")], [(p, 20)])  # fmt: skip
    reports = [("started", 2.0)] + ([] if run_s is None else [("finished", 2.0 + run_s)])
    w.write("jobs_lifecycle", [JobLifecycle(event_id=f"l-{cluster}-{state}", event_time=at(t), job_id="job1",
                                            cluster=cluster, state=state, decision_id=DID, node_id=node,  # type: ignore[arg-type]
                                            exit_code=0 if state == "finished" else None)
                               for state, t in reports], [(p, 30 + i) for i in range(len(reports))])  # fmt: skip


@pytest.fixture
def both_finished(client: ArchiveClient) -> ArchiveClient:
    """a's job1 ran 8 s on n0, b's 100 s on n1."""
    w = ArchiveWriter(client)
    write_cluster(w, "a", 8)
    write_cluster(w, "b", 100)
    return client


def test_each_cluster_keeps_its_applied_decision_and_reports(both_finished: ArchiveClient) -> None:
    c = both_finished
    assert c.query_rows("SELECT cluster, decision_id, node_id FROM decisions_applied ORDER BY cluster")[1] == [
        ("a", DID, "n0"), ("b", DID, "n1")]  # fmt: skip
    assert c.query_rows("SELECT cluster, state, node_id FROM jobs_lifecycle_applied ORDER BY cluster, event_time")[1] == [
        ("a", "started", "n0"), ("a", "finished", "n0"), ("b", "started", "n1"), ("b", "finished", "n1")]  # fmt: skip
    _, nulls = c.query_rows("SELECT count() FROM jobs_lifecycle_applied SETTINGS join_use_nulls = 1")
    assert nulls == [(4,)]


def test_retraining_replays_each_clusters_placement_and_its_end(both_finished: ArchiveClient) -> None:
    te = training_events(both_finished)
    assert [(d.cluster, d.node_id) for d in te.placed] == [("a", "n0"), ("b", "n1")]
    assert [(e.cluster, e.state) for e in te.ends] == [("a", "started"), ("a", "finished"), ("b", "started"),
                                                       ("b", "finished")]  # fmt: skip
    folded = fold_events(te)
    assert [(p.cluster, p.node_id, p.end_state, p.end_time - p.time) for p in folded.placed] == [
        ("a", "n0", "finished", 9.0), ("b", "n1", "finished", 101.0)]  # fmt: skip


def test_a_finished_jobs_run_time_is_its_own_clusters(both_finished: ArchiveClient) -> None:
    c = both_finished
    assert [(f.submission.cluster, f.run_s) for f in finished_jobs(c, "b")] == [("b", 100.0)]
    assert [(f.submission.cluster, f.run_s) for f in finished_jobs(c)] == [("a", 8.0), ("b", 100.0)]
    assert [(f.submission.cluster, f.run_s) for f in finished_jobs(c, latest=1)] == [("b", 100.0)]
    assert [(r.submission.cluster, r.started_s - at(0).timestamp(), r.ended_s - r.started_s)  # type: ignore[operator]
            for r in job_runs(c)] == [("a", 2.0, 8.0), ("b", 2.0, 100.0)]  # fmt: skip
    assert [(r.submission.cluster, r.ended_s - r.started_s) for r in job_runs(c, "b")] == [("b", 100.0)]  # type: ignore[operator]


@pytest.fixture
def one_running(client: ArchiveClient) -> ArchiveClient:
    """a's job1 ran 8 s on n0; b's job1 runs on n1 since 2 s. Both clusters also gave up a job2 (their own
    reasons) and have a job3 never decided."""
    w = ArchiveWriter(client)
    write_cluster(w, "a", 8)
    write_cluster(w, "b", None)
    for cluster in ("a", "b"):
        p = PARTITION[cluster]
        w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{cluster}-{j}", event_time=at(3), job_id=j,
                                                cluster=cluster, cpu_milli=1000) for j in ("job2", "job3")],
                [(p, 11), (p, 12)])  # fmt: skip
        w.write("jobs_lifecycle", [JobLifecycle(event_id=f"r-{cluster}", event_time=at(4), job_id="job2",
                                                cluster=cluster, state="rejected", reason=f"no room in {cluster}")],
                [(p, 40)])  # fmt: skip
    return client


def test_the_job_metrics_and_the_summary_count_each_clusters_job(one_running: ArchiveClient) -> None:
    from scheduling.metrics import job_metrics
    from storage.queries import metrics as m
    from storage.queries.outcomes import job_outcomes, job_outcomes_by_policy
    from storage.queries.summary import summary

    c = one_running
    a = m.job_metrics(c)["all"]
    assert (a.jobs, a.finished, a.rejected, a.unfinished) == (6, 1, 2, 3)
    assert a.jct.mean == pytest.approx(10.0) and a.queueing_delay.n == 2
    assert a.placement_rate_per_s == pytest.approx(2 / 10)
    assert [(o.job_id, o.state) for o in job_outcomes(c)] == [("job1", "finished"), ("job2", "rejected"),
                                                              ("job3", "pending"), ("job1", "running"),
                                                              ("job2", "rejected"), ("job3", "pending")]  # fmt: skip
    assert job_metrics(job_outcomes(c)) == a
    assert {p: job_metrics(o) for p, o in job_outcomes_by_policy(c).items()} == m.job_metrics(c, "policy")
    s = summary(c)
    assert (s.submitted, s.placed, s.finished, s.rejected, s.running) == (6, 2, 1, 2, 1)
    assert s.rejected_by_reason == {"no room in a": 1, "no room in b": 1}
    assert m.stability(c)["all"].placements == 2 and m.stability(c)["all"].reversals == 0


def test_each_clusters_job_holds_its_gpu_for_its_own_run(both_finished: ArchiveClient) -> None:
    from storage.queries import metrics as m

    # a's GPU held from 2 s to 10 s, b's from 2 s to 102 s, of the 8 GPUs of the four nodes
    expected = [(8 + 48) / 50 / 8, 1 / 8, 1 / 8]
    assert [x.ratio for x in m.gpu_allocation(both_finished, 50.0)] == pytest.approx(expected)
    assert [x.ratio for x in m.gpu_allocation_in_sql(both_finished, 50.0)] == pytest.approx(expected)


def test_every_panel_counts_each_clusters_job_and_reads_the_same_with_join_use_nulls(
        both_finished: ArchiveClient) -> None:  # fmt: skip
    from storage.queries.panels import PANELS, PANELS_BY_ID, expand_macros

    c = both_finished
    for p in PANELS:
        sql = expand_macros(p.sql, at(-60), at(120), 10)
        assert c.query_rows(sql + "\nSETTINGS join_use_nulls = 1")[1] == c.query_rows(sql)[1], p.id
    cols, rows = c.query_rows(expand_macros(PANELS_BY_ID["queue.summary"].sql, at(-60), at(120), 10))
    assert dict(zip(cols, rows[0], strict=True))["jobs"] == 2
    _, rows = c.query_rows(expand_macros(PANELS_BY_ID["utilisation.throughput"].sql, at(-60), at(120), 10))
    assert sorted((series, value * 10) for _, series, value in rows) == [("finished", 1), ("finished", 1),
                                                                         ("placed", 2)]  # fmt: skip
    _, rows = c.query_rows(expand_macros(PANELS_BY_ID["queue.jct"].sql, at(-60), at(120), 10))
    assert sorted(mean for _, mean, *_ in rows) == [10.0, 102.0]


def test_reconciliation_checks_each_clusters_job_and_names_its_cluster(client: ArchiveClient) -> None:
    """a's job1 finished on n0 and b's ran on n1: not one job placed and started twice. b's job5 timed out
    at attempt 0 before it started and runs at attempt 1 while a's job5 runs at attempt 0: no attempt of one
    job ran beside another. b's job7, never decided, is lost though a's job7 finished, and is named with its
    cluster."""
    from rich.console import Console

    from ops.summary_view import print_reconcile
    from storage.queries.reconcile import reconcile

    w = ArchiveWriter(client)
    write_cluster(w, "a", 8)
    write_cluster(w, "b", 100)
    assert reconcile(client).ok, reconcile(client)

    def report(cluster: str, attempt: int, state: str, s: float) -> JobLifecycle:
        return JobLifecycle(event_id=f"j5-{cluster}-{attempt}-{state}", event_time=at(s), job_id="job5",
                            cluster=cluster, state=state, attempt=attempt,  # type: ignore[arg-type]
                            node_id=None if state == "timed_out" else "n0",
                            decision_id=decision_id_for("job5", attempt, "sub"))  # fmt: skip

    w.write("jobs_lifecycle", [report("a", 0, "started", 3)], [(0, 50)])
    w.write("jobs_lifecycle", [report("b", 0, "timed_out", 4), report("b", 1, "started", 6)], [(1, 50), (1, 51)])
    assert reconcile(client).ok, reconcile(client)
    # cluster b's job7 is lost; a's job7 finished
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s7-{c}", event_time=at(0), job_id="job7", cluster=c,
                                            cpu_milli=100) for c in "ab"], [(0, 60), (1, 60)])  # fmt: skip
    w.write("jobs_lifecycle", [JobLifecycle(event_id="f7-a", event_time=at(9), job_id="job7", cluster="a",
                                            state="finished", node_id="n1", exit_code=0,
                                            decision_id=decision_id_for("job7", 0, "sub"))], [(0, 61)])  # fmt: skip
    r = reconcile(client)
    assert r.unaccounted == [("b", "job7")] and not r.placed_twice and not r.started_twice and not r.ran_twice
    console = Console(record=True, width=200)
    assert not print_reconcile(console, r, submitted=3)
    assert "unaccounted (lost): 1: b/job7" in console.export_text()


def test_explain_tells_one_clusters_story(both_finished: ArchiveClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """``explain job1`` mixed a's and b's events into one story (a's decision, both clusters' reports) and
    answered with whichever came last. A refused submission of job1 to b is b's."""
    import typer
    from typer.testing import CliRunner

    from ops.cli import db
    from scheduling.events import DeadLetter
    from storage.queries.explain import AmbiguousJob, explain, job_clusters

    c = both_finished
    refused = JobSubmitted(event_id="s-b-again", event_time=at(50), job_id="job1", cluster="b", cpu_milli=1)
    dead = DeadLetter.of(refused.to_bytes(), "job id job1 in use", topic="jobs.submitted", partition=1, offset=99,
                         key=b"job1").model_copy(update={"event_time": at(50)})  # fmt: skip
    ArchiveWriter(c).write("deadletter", [dead], [(0, 0)])
    assert job_clusters(c, "job1") == ["a", "b"]
    with pytest.raises(AmbiguousJob, match="job job1 is in clusters a, b"):
        explain(c, "job1")
    a, b = explain(c, "job1", "a"), explain(c, "job1", "b")
    assert a.answer.startswith("Job job1 finished on node n0 at 2026-03-01T00:00:10+00:00 (JCT 10.0s)")
    assert b.answer.startswith("Job job1 finished on node n1 at 2026-03-01T00:01:42+00:00 (JCT 102.0s)")
    assert [(x.source, x.text.split(" (")[0]) for x in b.timeline] == [
        ("submitted", "submitted by default to b: 1000m CPU, 100 MiB, 1 GPU, priority 0 BE"),
        ("decision", "placed on n1 by best-fit"), ("lifecycle", "started on n1"),
        ("dead letter", "submission refused: job id job1 in use"), ("lifecycle", "finished on n1")]  # fmt: skip
    assert [x.source for x in a.timeline] == ["submitted", "decision", "lifecycle", "lifecycle"]
    assert (a.cluster, b.cluster) == ("a", "b")
    # an id one cluster holds is that cluster's story, without naming it
    ArchiveWriter(c).write("jobs_submitted", [JobSubmitted(event_id="s-a-2", event_time=at(3), job_id="job2",
                                                           cluster="a", cpu_milli=1)], [(0, 70)])  # fmt: skip
    only = explain(c, "job2")
    assert only.cluster == "a" and only.answer.startswith("Job job2 is pending since")
    # the command answers for each cluster in turn, or for the one named
    monkeypatch.setattr(db, "running_worker", lambda settings, timeout: c)
    app = typer.Typer()
    app.command("explain")(db.explain_command)
    app.command("other")(lambda: None)  # (two commands: typer keeps the command name in the args)
    r = CliRunner().invoke(app, ["explain", "job1"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "cluster a" in r.output and "finished on node n0" in r.output
    assert "cluster b" in r.output and "finished on node n1" in r.output
    r = CliRunner().invoke(app, ["explain", "job1", "--cluster", "b"], terminal_width=200)
    assert r.exit_code == 0 and "finished on node n1" in r.output and "n0" not in r.output, r.output
    r = CliRunner().invoke(app, ["explain", "job2", "--cluster", "b"])  # (and says which cluster holds it)
    assert r.exit_code == 1 and "not in cluster 'b': the archive holds it in 'a'" in " ".join(r.output.split())


def test_the_bench_pipeline_reads_count_each_clusters_job(both_finished: ArchiveClient) -> None:
    """``semsched bench pipeline``'s reads: two jobs complete, each commanded 1 s after its submission,
    neither finished twice (read by job id, a's and b's job1 was one job that finished twice)."""
    from scheduling.events import PlacementCommand
    from storage.queries import bench_pipeline as q

    c = both_finished
    ArchiveWriter(c).write("actions", [PlacementCommand(event_id=f"a-{cl}", event_time=at(1), decision_id=DID,
                                                        job_id="job1", cluster=cl, node_id=NODE[cl], policy="best-fit",
                                                        gpu_indices=[0]) for cl in "ab"], [(0, 0), (1, 0)])  # fmt: skip
    assert c.query_rows(q.COMPLETE)[1][0][0] == 2
    assert sorted(c.query_rows(q.SUBMIT_TO_COMMAND_MS)[1]) == [(1000,), (1000,)]
    # a refused second submission of a's job1 (a reused id, 30 s later) is no second latency (found by review)
    ArchiveWriter(c).write("jobs_submitted", [JobSubmitted(event_id="s-a-again", event_time=at(30), job_id="job1",
                                                           cluster="a", cpu_milli=1)], [(0, 90)])  # fmt: skip
    ArchiveWriter(c).write("deadletter", [DeadLetter.of(b"{}", "job id 'job1' was already submitted",
                                                        topic="jobs.submitted", partition=0, offset=90)])  # fmt: skip
    assert sorted(c.query_rows(q.SUBMIT_TO_COMMAND_MS)[1]) == [(1000,), (1000,)]
    assert c.query_rows(q.FINISHED_MORE_THAN_ONCE)[1] == [(0,)]
    assert c.query_rows(q.TERMINAL_JOBS)[1] == [(2,)]
    assert len(c.query_rows(q.STEP_COMPUTE_MS)[1]) == 2  # a step per cluster
