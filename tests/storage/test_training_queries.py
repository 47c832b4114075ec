"""The archive reads the learned scheduler's training and promotion use
(``storage/queries/training_events.py``, ``finished_jobs.py``, ``model_versions.py``), on a real
chdb archive filled through the archive's write path, every event delivered twice."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from storage_scenario import T0, at, scenario

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, decision_id_for
from storage.client import ArchiveClient
from storage.queries.finished_jobs import finished_jobs
from storage.queries.job_runs import job_runs
from storage.queries.model_versions import insert_model_version, model_version, model_versions
from storage.queries.training_events import training_events
from storage.writer import ArchiveWriter


@pytest.fixture
def loaded(client: ArchiveClient) -> ArchiveClient:
    w = ArchiveWriter(client)
    for _ in range(2):  # redelivered: counts once
        for table, events in scenario().items():
            w.write(table, events, [(0, i) for i in range(len(events))])
    return client


def test_training_events_are_the_archived_events(loaded: ArchiveClient) -> None:
    ev = training_events(loaded)
    [node] = ev.nodes  # the latest capacity, no allocation (a replay starts empty)
    assert (node.node_id, node.cluster, node.cpu_milli, node.num_gpu, node.gpu_model) == ("n1", "default", 64000, 4,
                                                                                          "A100")  # fmt: skip
    assert node.gpu_alloc_milli == [] and node.event_time == at(70)
    assert [(s.job_id, s.event_time) for s in ev.submissions] == [(j, at(i)) for i, j in enumerate("ABCDF")]
    assert ev.submissions[0].cpu_milli == 1000 and ev.submissions[1].num_gpu == 8
    assert [d.decision_id for d in ev.placed] == [decision_id_for("A", 0, "sub"), decision_id_for("D", 0, "sub")]
    a = ev.placed[0]
    assert (a.node_id, a.gpu_indices, a.policy, a.event_time, a.gpu_milli_per_gpu) == ("n1", [0], "best-fit", at(2),
                                                                                       1000)  # fmt: skip
    assert [(c.node_id, c.score) for c in a.candidates] == [("n1", 0.9), ("n2", 0.4)]
    # starts, ends and rejections in the topic's order (what the worker applied first), with their positions
    assert [(e.job_id, e.state, e.event_time) for e in ev.ends] == [
        ("A", "started", at(5)), ("A", "finished", at(65)), ("B", "rejected", at(30)), ("D", "started", at(8))]  # fmt: skip
    assert ev.ends[1].exit_code == 0 and ev.end_positions == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert ev.placed_partitions == [0, 0] and [d.lifecycle_through for d in ev.placed] == [None, None]


def test_a_window_reads_every_job_but_those_over_before_it(loaded: ArchiveClient) -> None:
    """(Found by review: the whole archive was read into memory.) A job is left out only when its latest event
    is an end for good before the window."""
    # G: its attempt failed before the window and nothing came after (queued again: pending at its start)
    g = decision_id_for("G", 0, "s-g")
    w = ArchiveWriter(loaded)
    w.write("jobs_submitted", [JobSubmitted(event_id="s-g", event_time=at(9), job_id="G")], [(0, 10)])
    w.write("decisions", [DecisionRecord(event_id=g, decision_id=g, event_time=at(10), job_id="G", outcome="placed",
                                         node_id="n1", policy="fgd", latency_ms=1.0)], [(0, 10)])  # fmt: skip
    w.write("jobs_lifecycle", [JobLifecycle(event_id="l-g", event_time=at(12), job_id="G", decision_id=g,
                                            state="finished", node_id="n1", exit_code=1)], [(0, 10)])  # fmt: skip

    def read(since: datetime | None) -> tuple[list[str], list[str], list[tuple[str, str]]]:
        ev = training_events(loaded, since=since)
        return ([s.job_id for s in ev.submissions], [d.job_id for d in ev.placed],
                [(e.job_id, e.state) for e in ev.ends])  # fmt: skip

    everything = read(None)
    assert everything[0] == list("ABCDFG") and read(at(0)) == everything
    # B was given up at 30 s: over before a window from 40 s; A finished at 65 s, inside it
    assert read(at(40)) == (list("ACDFG"), ["A", "D", "G"],
                            [("A", "started"), ("A", "finished"), ("D", "started"), ("G", "finished")])  # fmt: skip
    # from 66 s A is over too; C (never decided), D (running), F (pending) and G (failed: queued again) are not
    assert read(at(66)) == (list("CDFG"), ["D", "G"], [("D", "started"), ("G", "finished")])
    assert len(training_events(loaded, since=at(66)).nodes) == 1  # the inventory is read whole
    # A's id used again (a new job, submitted at 70 s, pending at 80 s): the id is read whole again
    w.write("jobs_submitted", [JobSubmitted(event_id="s-a2", event_time=at(70), job_id="A")], [(0, 11)])
    assert read(at(80))[0] == list("AACDFG") and read(at(80))[1] == ["A", "D", "G"]


@pytest.mark.parametrize("through", [2, 3])
def test_a_window_reads_a_job_whose_end_its_first_steps_had_not_applied(loaded: ArchiveClient, through: int) -> None:
    """Found by review: B's rejection is stamped at 30 s, but a decision of the window (from 40 s) says its step
    had applied the reports below offset ``through`` of the partition only; B's is at offset 2. Unapplied, the
    worker still counted B: it is read (the replay frees it when the decisions say)."""
    w = ArchiveWriter(loaded)
    w.write("decisions", [DecisionRecord(event_id="d-w", decision_id="d-w", event_time=at(45), job_id="W",
                                         outcome="placed", node_id="n1", policy="fgd", latency_ms=1.0,
                                         lifecycle_through=through)], [(0, 20)])  # fmt: skip
    jobs = {s.job_id for s in training_events(loaded, since=at(40)).submissions}
    assert ("B" in jobs) == (through <= 2)
    assert {"C", "D", "F"} <= jobs


def test_placed_decisions_of_one_millisecond_come_in_kafka_order(client: ArchiveClient) -> None:
    decisions = [DecisionRecord(event_id=d, decision_id=d, event_time=T0, job_id=d, outcome="placed", node_id="n1",
                                policy="fgd", latency_ms=1.0, step_id="s1") for d in ("z", "a", "m")]  # fmt: skip
    ArchiveWriter(client).write("decisions", decisions, [(0, 5), (0, 6), (0, 7)])
    assert [d.decision_id for d in training_events(client).placed] == ["z", "a", "m"]


def test_finished_jobs_have_the_run_time_of_their_attempt(loaded: ArchiveClient) -> None:
    [a] = finished_jobs(loaded)  # B was rejected, C never ran, D still runs, F never placed
    assert a.submission.job_id == "A" and a.run_s == pytest.approx(60.0)
    assert a.submit_s == pytest.approx(T0.timestamp()) and a.submission.event_time == T0
    assert a.submission.trace_duration_s is None
    assert finished_jobs(loaded, cluster="default") == [a] and finished_jobs(loaded, cluster="other") == []
    assert finished_jobs(loaded, cluster="") == [] and job_runs(loaded, cluster="") == []  # (a syntax error before)


def _row(version: str, status: str, **kw: object) -> dict[str, object]:
    return {"version": version, "created_at": datetime(2026, 2, 1, tzinfo=UTC), "parent_version": "", "source": "archive",
            "expert": "fgd", "path": f"/models/{version}", "config": {"hidden": 16}, "train_metrics": {"epochs": 2},
            "evaluation": {}, "primary_metric": "fill", "candidate_score": None, "serving_score": None,
            "status": status, "reason": "", "decided_at": None} | kw  # fmt: skip


def test_model_versions_keep_the_latest_revision_of_each_version(client: ArchiveClient) -> None:
    assert model_version(client, "v1") is None and model_versions(client) == []
    first = insert_model_version(client, _row("v1", "candidate"))
    evaluation = {"candidate": {"score": 91.5, "latency": {"p50_ms": 4.0, "p99_ms": 9.5}}, "latency_budget_ms": 100}
    decided = datetime(2026, 2, 1, 0, 5, tzinfo=UTC)
    second = insert_model_version(client, _row("v1", "promoted", evaluation=evaluation, candidate_score=91.5,
                                               reason="first version", decided_at=decided))  # fmt: skip
    insert_model_version(client, _row("v0", "rejected", created_at=datetime(2026, 1, 1, tzinfo=UTC)))
    assert second > first
    row = model_version(client, "v1")
    assert row is not None and row["status"] == "promoted" and row["revision"] == second
    assert row["evaluation"] == evaluation and row["config"] == {"hidden": 16}
    assert row["candidate_score"] == 91.5 and row["serving_score"] is None
    assert row["decided_at"] == decided and row["created_at"] == datetime(2026, 2, 1, tzinfo=UTC)
    assert [(r["version"], r["status"]) for r in model_versions(client)] == [("v0", "rejected"), ("v1", "promoted")]
    _, [(stored,)] = client.query_rows("SELECT count() FROM model_versions WHERE version = 'v1'")
    assert stored == 2  # both revisions stored, the latest read back


def test_the_latest_finished_jobs_come_oldest_finish_first(client: ArchiveClient) -> None:
    """What a worker warms its duration estimate with: the jobs that finished last, in finish order
    (not submission order), each with its finish time."""
    from scheduling.events import JobLifecycle, JobSubmitted

    w = ArchiveWriter(client)
    # X submitted first but finished last; Y and Z finish earlier, Z before Y
    subs = [JobSubmitted(event_id=f"s-{j}", event_time=at(i), job_id=j) for i, j in enumerate("XYZ")]
    runs = {"X": (10, 500), "Y": (11, 300), "Z": (12, 200)}
    life = [JobLifecycle(event_id=f"l-{j}-{state}", event_time=at(t), job_id=j, decision_id="d", state=state,
                         node_id="n1") for j, (start, end) in runs.items()
            for state, t in (("started", start), ("finished", end))]  # fmt: skip
    w.write("jobs_submitted", subs, [(0, i) for i in range(len(subs))])
    w.write("jobs_lifecycle", life, [(0, i) for i in range(len(life))])
    assert [f.submission.job_id for f in finished_jobs(client)] == ["X", "Y", "Z"]  # submission order
    latest = finished_jobs(client, latest=2)
    assert [(f.submission.job_id, f.finish_s, f.run_s) for f in latest] == [
        ("Y", at(300).timestamp(), 289.0), ("X", at(500).timestamp(), 490.0)]  # fmt: skip
    assert [f.submission.job_id for f in finished_jobs(client, latest=10)] == ["Z", "Y", "X"]
    with pytest.raises(ValueError, match="at least 1"):
        finished_jobs(client, latest=0)
    # a bounded read (the worker's start-up) answers the same
    assert finished_jobs(client, latest=2, timeout_s=30) == latest


def test_job_runs_are_every_attempt_that_started_with_when_it_ended(loaded: ArchiveClient) -> None:
    runs = job_runs(loaded)  # A ran 5..65 s; D started at 8 s and still runs; B, C and F never started
    assert [(r.submission.job_id, r.started_s - T0.timestamp(), r.ended_s) for r in runs] == [
        ("A", 5.0, at(65).timestamp()), ("D", 8.0, None)]  # fmt: skip
    assert runs[0].submission.trace_duration_s is None and runs[0].submit_s == T0.timestamp()
    assert job_runs(loaded, cluster="other") == []


def test_a_job_run_ends_at_its_attempts_first_end_and_a_timeout_after_its_start_is_none(client: ArchiveClient) -> None:
    sub = [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j) for j in ("X", "Y")]

    def life(job: str, attempt: int, state: str, t: int) -> JobLifecycle:
        return JobLifecycle(event_id=f"{job}-{attempt}-{state}-{t}", event_time=at(t), job_id=job, attempt=attempt,
                            decision_id=decision_id_for(job, attempt, "sub"), state=state, node_id="n1")  # fmt: skip

    events = [life("X", 0, "started", 10), life("X", 0, "preempted", 20), life("X", 1, "started", 30),
              life("X", 1, "failed", 50), life("X", 1, "finished", 55),  # its first end counts
              life("Y", 0, "started", 12), life("Y", 0, "timed_out", 15)]  # fmt: skip
    w = ArchiveWriter(client)
    for _ in range(2):  # redelivered: counts once
        w.write("jobs_submitted", sub, [(0, i) for i in range(len(sub))])
        w.write("jobs_lifecycle", events, [(0, i) for i in range(len(events))])
    got = [(r.submission.job_id, r.started_s, r.ended_s) for r in job_runs(client)]
    assert got == [("X", at(10).timestamp(), at(20).timestamp()), ("X", at(30).timestamp(), at(50).timestamp()),
                   ("Y", at(12).timestamp(), None)]  # fmt: skip


def test_a_job_id_used_again_is_another_job_in_the_training_replay(client: ArchiveClient) -> None:
    """Found by review: once a job is forgotten (SEMSCHED_DONE_RETENTION) its id may name a new job; training
    kept the first submission per id and the first end per (id, attempt), so the later job's decision was
    replayed with the first one's demand and end (its failure imitated as "finished", before its placement).
    Also an id whose first submission was rejected, then submitted again and placed: the placed one's demand."""
    from inference.training.archive import eligible
    from inference.training.archive_events import fold_events

    later = 8 * 86400
    d1, d2, dr = decision_id_for("j", 0, "s1"), decision_id_for("j", 0, "s2"), decision_id_for("r", 0, "r2")
    events = {
        "jobs_submitted": [
            JobSubmitted(event_id="s1", event_time=at(0), job_id="j", cpu_milli=1000, memory_mib=100, num_gpu=0),
            JobSubmitted(event_id="r1", event_time=at(1), job_id="r", cpu_milli=7000, memory_mib=100, num_gpu=0),
            JobSubmitted(event_id="r2", event_time=at(3), job_id="r", cpu_milli=2000, memory_mib=100, num_gpu=0),
            JobSubmitted(event_id="s2", event_time=at(later), job_id="j", cpu_milli=6000, memory_mib=100, num_gpu=0)],
        "decisions": [
            DecisionRecord(event_id=d, decision_id=d, event_time=at(t), job_id=job, attempt=0, outcome="placed",
                           node_id="n1", policy="fgd", latency_ms=1, cpu_milli=cpu, memory_mib=100, step_id=f"st{t}")
            for d, job, t, cpu in ((d1, "j", 1, 1000), (dr, "r", 4, 2000), (d2, "j", later + 1, 6000))],
        "jobs_lifecycle": [
            JobLifecycle(event_id="r1-x", event_time=at(2), job_id="r", state="rejected"),
            JobLifecycle(event_id="a1", event_time=at(1.5), job_id="j", decision_id=d1, state="started", node_id="n1"),
            JobLifecycle(event_id="b1", event_time=at(10), job_id="j", decision_id=d1, state="finished", exit_code=0,
                         node_id="n1"),
            JobLifecycle(event_id="a2", event_time=at(later + 1.5), job_id="j", decision_id=d2, state="started",
                         node_id="n1"),
            JobLifecycle(event_id="b2", event_time=at(later + 50), job_id="j", decision_id=d2, state="failed",
                         exit_code=1, node_id="n1")],
    }  # fmt: skip
    w = ArchiveWriter(client)
    for table, rows in events.items():
        w.write(table, rows, [(0, i) for i in range(len(rows))])
    ev = fold_events(training_events(client))
    got = {p.decision_id: (p.job_id, ev.jobs[(p.cluster, p.job_id)].cpu_milli, p.end_state, p.end_time) for p in ev.placed}
    assert got[d1] == ("j", 1000, "finished", at(10).timestamp())
    assert got[d2] == ("j~2", 6000, "failed", at(later + 50).timestamp())
    assert got[dr][:2] == ("r", 2000)
    kept, _ = eligible(ev, ["finished"], None)
    assert [p.decision_id for p in kept] == [d1]
