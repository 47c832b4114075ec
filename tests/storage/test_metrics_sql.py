"""The metrics SQL (storage/queries/metrics.py) on hand-written archive rows whose answers are
known, and against scheduling.metrics on outcomes rebuilt from the same rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from scheduling.events import (
    DeadLetter,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decision_id_for,
)
from scheduling.metrics import Distribution, job_metrics, placement_stability
from storage.client import ArchiveClient
from storage.queries import metrics as m
from storage.queries.outcomes import job_outcomes, job_outcomes_by_policy
from storage.writer import ArchiveWriter

T0 = datetime(2026, 2, 1, tzinfo=UTC)
BF, FF = "best-fit", "fifo-first-fit"


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def placed(job: str, attempt: int, t: float, policy: str, latency: float, step: float, gpus: int = 1) -> DecisionRecord:
    did = decision_id_for(job, attempt, "sub")
    return DecisionRecord(event_id=did, decision_id=did, event_time=at(t), job_id=job, attempt=attempt,
                          outcome="placed", node_id="n1", gpu_indices=list(range(gpus)), policy=policy,
                          latency_ms=latency, step_compute_ms=step, gpu_milli_per_gpu=1000)  # fmt: skip


def life(job: str, attempt: int, state: str, t: float) -> JobLifecycle:
    return JobLifecycle(event_id=f"{job}-{attempt}-{state}-{t}", event_time=at(t), job_id=job, attempt=attempt,
                        state=state, node_id="n1", decision_id=f"d-{job}-{attempt}")  # type: ignore[arg-type]  # fmt: skip


# best-fit: J1 runs once; J2 fails and runs again; J3's timeout raced with its start (kept
# running: no reversal); J4 is rejected. fifo-first-fit: K1 is preempted and re-placed (still
# running); K2 times out and is re-placed; K3 waits (unschedulable).
SUBMIT = {"J1": 0, "J2": 0, "J3": 2, "J4": 3, "K1": 10, "K2": 10, "K3": 12}
DECISIONS = [
    placed("J1", 0, 1, BF, 1000, 5.0), placed("J2", 0, 1, BF, 1000, 5.0), placed("J2", 1, 6, BF, 1000, 7.0),
    placed("J3", 0, 4, BF, 2000, 6.0, gpus=2),
    DecisionRecord(event_id="r-j4", decision_id="r-j4", event_time=at(4), job_id="J4", outcome="rejected",
                   policy=BF, latency_ms=1000, step_compute_ms=6.0, reason="can never run"),
    placed("K1", 0, 11, FF, 1000, 2.0), placed("K2", 0, 11, FF, 1000, 2.0), placed("K1", 1, 15, FF, 1000, 3.0),
    placed("K2", 1, 42, FF, 4000, 4.0),
    DecisionRecord(event_id="u-k3", decision_id="u-k3", event_time=at(11), job_id="K3", outcome="unschedulable",
                   policy=FF, latency_ms=0, step_compute_ms=2.0, reason="insufficient GPU"),
]  # fmt: skip
LIFE = [
    life("J1", 0, "started", 2), life("J1", 0, "finished", 12),
    life("J2", 0, "started", 3), life("J2", 0, "failed", 5), life("J2", 1, "started", 7), life("J2", 1, "finished", 20),
    life("J3", 0, "started", 5), life("J3", 0, "timed_out", 6), life("J3", 0, "finished", 10),
    life("J4", 0, "rejected", 4),
    life("K1", 0, "started", 12), life("K1", 0, "preempted", 14), life("K1", 1, "started", 16),
    life("K2", 0, "timed_out", 41), life("K2", 1, "started", 43), life("K2", 1, "finished", 50),
]  # fmt: skip
JCT = {"J1": 12, "J2": 20, "J3": 8, "K2": 40}
WAIT = {"J1": 2, "J2": 3, "J3": 3, "K1": 2, "K2": 33}


@pytest.fixture
def archive(client: ArchiveClient) -> ArchiveClient:
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=at(t), job_id=j, num_gpu=1)
                               for j, t in SUBMIT.items()])  # fmt: skip
    w.write("decisions", DECISIONS)
    w.write("jobs_lifecycle", LIFE)
    w.write("nodes_telemetry", [NodeTelemetry(event_id=f"t-{n}", event_time=at(0), node_id=n, source="inventory",
                                              cpu_milli=64000, memory_mib=512000, num_gpu=4, gpu_model="A100")
                                for n in ("n1", "n2")])  # fmt: skip
    w.write("deadletter", [DeadLetter.of(b"{x", "bad json", topic="jobs.submitted", partition=0, offset=1),
                           DeadLetter.of(b"{y", "bad json", topic="jobs.submitted", partition=0, offset=2),
                           DeadLetter.of(b"z", "too large", topic="nodes.telemetry", partition=1, offset=1)])
    return client


def test_job_metrics_known_answers(archive: ArchiveClient) -> None:
    a = m.job_metrics(archive)["all"]
    assert (a.jobs, a.finished, a.rejected, a.unfinished) == (7, 4, 1, 2)
    assert a.jct == Distribution.of(JCT.values())
    assert a.jct.mean == pytest.approx(20) and a.jct.p50 == pytest.approx(16) and a.jct.p95 == pytest.approx(37)
    assert a.queueing_delay == Distribution.of(WAIT.values())
    assert a.makespan_s == pytest.approx(50)
    assert a.throughput_jobs_per_s == pytest.approx(4 / 50)
    assert a.placement_rate_per_s == pytest.approx(8 / 50)  # J2, K1, K2 were placed twice


def test_job_metrics_per_policy(archive: ArchiveClient) -> None:
    by = m.job_metrics(archive, "policy")
    assert set(by) == {BF, FF}
    bf, ff = by[BF], by[FF]
    assert (bf.jobs, bf.finished, bf.rejected, bf.unfinished) == (4, 3, 1, 0)
    assert (ff.jobs, ff.finished, ff.rejected, ff.unfinished) == (3, 1, 0, 2)
    assert bf.makespan_s == pytest.approx(20) and ff.makespan_s == pytest.approx(40)
    assert ff.jct == Distribution.of([40]) and ff.placement_rate_per_s == pytest.approx(4 / 40)


def test_sql_agrees_with_scheduling_metrics_on_rebuilt_outcomes(archive: ArchiveClient) -> None:
    outcomes = job_outcomes(archive)
    assert {o.job_id: o.state for o in outcomes} == {"J1": "finished", "J2": "finished", "J3": "finished",
                                                     "J4": "rejected", "K1": "running", "K2": "finished",
                                                     "K3": "pending"}  # fmt: skip
    assert m.job_metrics(archive)["all"] == job_metrics(outcomes)
    by = job_outcomes_by_policy(archive)
    assert {p: job_metrics(o) for p, o in by.items()} == m.job_metrics(archive, "policy")


def test_no_throughput_over_a_makespan_that_is_not_positive(client: ArchiveClient) -> None:
    """A finish stamped before its submission (the agent's clock behind the producer's): the makespan is
    negative. The SQL gives no throughput; scheduling.metrics gave a negative one (found by review)."""
    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s-A", event_time=at(10), job_id="A", num_gpu=1)])
    w.write("decisions", [placed("A", 0, 10, BF, 1, 1.0)])
    w.write("jobs_lifecycle", [life("A", 0, "started", 4), life("A", 0, "finished", 5)])
    sql = m.job_metrics(client)["all"]
    assert sql.makespan_s == pytest.approx(-5) and sql.throughput_jobs_per_s is None
    assert sql.placement_rate_per_s is None
    assert job_metrics(job_outcomes(client)) == sql


def test_decision_latency_and_step_compute(archive: ArchiveClient) -> None:
    lat = m.decision_latency(archive, "policy")
    assert lat[BF] == Distribution.of([1000, 1000, 1000, 2000])
    assert lat[FF] == Distribution.of([1000, 1000, 1000, 4000])
    assert m.decision_latency(archive)["all"].n == 8
    steps = m.step_compute(archive, "policy")
    assert steps[BF] == Distribution.of([5.0, 6.0, 7.0])  # J3's placement and J4's rejection: one step
    assert steps[FF] == Distribution.of([2.0, 3.0, 4.0])
    assert m.step_compute(archive)["all"].n == 6


def test_placement_stability(archive: ArchiveClient) -> None:
    s = m.stability(archive, "policy")
    assert (s[BF].placements, s[BF].reversals, s[BF].reversals_by_cause) == (4, 1, {"failed": 1})
    assert (s[FF].placements, s[FF].reversals, s[FF].reversals_by_cause) == (4, 2, {"preempted": 1, "timed_out": 1})
    assert s[BF].placement_stability == pytest.approx(placement_stability(4, 1)) == pytest.approx(0.75)
    a = m.stability(archive)["all"]
    assert a.placement_stability == pytest.approx(placement_stability(8, 3))


def test_a_timeout_that_raced_the_start_is_not_what_a_later_preemption_reverses(
        client: ArchiveClient) -> None:  # fmt: skip
    """P started (30.5 s), its confirmation timeout (31 s) raced the start and the worker kept the run; it
    was preempted at 100 s and placed again at 105 s. The reversal was attributed to the raced timeout,
    at 31 s (found by review): stability counted a timeout, and the Pending panel showed P waiting from
    31 s to 105 s while it ran. A timeout read before the start (Q: the worker re-queued it, and the late
    start was fenced) is the reversal."""
    from storage.queries.panels import PANELS_BY_ID, expand_macros

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, num_gpu=1)
                               for j in "PQ"])  # fmt: skip
    w.write("decisions", [placed("P", 0, 1, BF, 1, 1.0), placed("Q", 0, 1, BF, 1, 1.0),
                          placed("P", 1, 105, BF, 1, 1.0), placed("Q", 1, 40, BF, 1, 1.0)])  # fmt: skip
    events = [life("P", 0, "started", 30.5), life("P", 0, "timed_out", 31), life("Q", 0, "timed_out", 31),
              life("Q", 0, "started", 32), life("Q", 0, "preempted", 33), life("P", 0, "preempted", 100),
              life("P", 1, "started", 106)]  # fmt: skip
    w.write("jobs_lifecycle", events, [(0, i) for i in range(len(events))])
    rows = client.query_rows(f"SELECT job_id, attempt, cause, toUnixTimestamp64Milli(reversed_at) "
                             f"FROM ({m.PLACEMENTS}) WHERE reversed ORDER BY job_id")[1]  # fmt: skip
    ms = lambda s: int(at(s).timestamp() * 1000)  # noqa: E731
    assert rows == [("P", 0, "preempted", ms(100)), ("Q", 0, "timed_out", ms(31))]
    assert m.stability(client)["all"].reversals_by_cause == {"preempted": 1, "timed_out": 1}
    pending = dict(client.query_rows(expand_macros(PANELS_BY_ID["queue.pending"].sql, at(0), at(110), 5))[1])
    assert [pending[int(at(s).timestamp())] for s in (0, 30, 35, 50, 90, 100, 110)] == [2, 0, 1, 0, 0, 1, 0]


def test_a_timeout_before_the_start_reverses_the_placement_before_the_job_is_decided_again(
        client: ArchiveClient) -> None:  # fmt: skip
    """A's placement timed out unconfirmed (30 s) and the worker re-queued it; no decision of attempt 1
    is archived yet (the worker writes a waiting record only when its reason changes). The placement
    counted as stable and the Pending panel dropped A at 30 s while it waited (found by review)."""
    from storage.queries.panels import PANELS_BY_ID, expand_macros

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s-A", event_time=at(0), job_id="A", num_gpu=1)])
    w.write("decisions", [placed("A", 0, 1, BF, 1, 1.0)])
    w.write("jobs_lifecycle", [life("A", 0, "timed_out", 30)], [(0, 0)])
    s = m.stability(client)["all"]
    assert (s.placements, s.reversals, s.reversals_by_cause, s.placement_stability) == (1, 1, {"timed_out": 1}, 0.0)
    pending = dict(client.query_rows(expand_macros(PANELS_BY_ID["queue.pending"].sql, at(0), at(60), 10))[1])
    assert [pending[int(at(s).timestamp())] for s in (0, 10, 30, 40, 60)] == [1, 0, 1, 1, 1]


def test_a_job_that_finished_after_it_was_re_queued_is_no_longer_pending(client: ArchiveClient) -> None:
    """L's placement timed out unconfirmed (31 s) and the worker re-queued it; its run finished after all
    (50 s) and the worker took the job as done ("finished after it was re-queued"). Nothing decides
    the re-queued attempt, and the Pending panel counted L for ever (found by review)."""
    from storage.queries.panels import PANELS_BY_ID, expand_macros

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id="s-L", event_time=at(0), job_id="L", num_gpu=1)])
    w.write("decisions", [placed("L", 0, 1, BF, 1, 1.0),
                          DecisionRecord(event_id="u-l", decision_id="u-l", event_time=at(40), job_id="L", attempt=1,
                                         outcome="unschedulable", policy=BF, latency_ms=1, reason="no node fits")])  # fmt: skip
    w.write("jobs_lifecycle", [life("L", 0, "timed_out", 31), life("L", 0, "finished", 50)], [(0, 0), (0, 1)])
    sql = expand_macros(PANELS_BY_ID["queue.pending"].sql, at(0), at(300), 10)
    pending = dict(client.query_rows(sql)[1])
    assert [pending[int(at(s).timestamp())] for s in (0, 30, 40, 50, 60, 300)] == [1, 0, 1, 0, 0, 0]
    assert client.query_rows(sql + "\nSETTINGS join_use_nulls = 1")[1] == client.query_rows(sql)[1]


@pytest.mark.parametrize("bucket_s", [10.0, 7.0, 60.0])
def test_gpu_allocation_sql_equals_allocation_over_time(archive: ArchiveClient, bucket_s: float) -> None:
    py = m.gpu_allocation(archive, bucket_s)
    sql = m.gpu_allocation_in_sql(archive, bucket_s)
    assert [s.bucket_start for s in sql] == pytest.approx([s.bucket_start for s in py])
    assert [s.ratio for s in sql] == pytest.approx([s.ratio for s in py])
    assert all(0 <= s.ratio <= 1 for s in sql) and py[0].capacity_milli == 8000


def test_gpu_allocation_known_values(archive: ArchiveClient) -> None:
    # in [0, 10): J1 holds 1 GPU over [2, 10), J2 over [3, 5), J3 2 GPUs over [5, 10), J2 again over [7, 10)
    first = m.gpu_allocation_in_sql(archive, 10.0)[0]
    assert first.ratio == pytest.approx((8 + 2 + 10 + 3) * 1000 / 10 / 8000)
    # [40, 50): K1's second placement, still running, holds until the archive's last event (50); K2 over [43, 50)
    last = m.gpu_allocation_in_sql(archive, 10.0)[-1]
    assert last.bucket_start == pytest.approx(at(40).timestamp())
    assert last.ratio == pytest.approx((10 + 7) * 1000 / 10 / 8000)


def test_gpu_allocation_sql_clipped_to_a_range(archive: ArchiveClient) -> None:
    ms = lambda s: str(int(at(s).timestamp() * 1000))  # noqa: E731
    full = {r[0]: r[2] for r in archive.query_rows(m.gpu_allocation_sql("10"))[1]}
    clipped = {r[0]: r[2] for r in archive.query_rows(m.gpu_allocation_sql("10", ms(15), ms(35)))[1]}
    assert sorted(clipped) == [int(at(s).timestamp() * 1000) for s in (10, 20, 30)]
    assert clipped == {b: full[b] for b in clipped}


def test_gpu_allocation_fills_idle_buckets_with_zero(client: ArchiveClient) -> None:
    w = ArchiveWriter(client)
    w.write("nodes_telemetry", [NodeTelemetry(event_id="t", event_time=at(0), node_id="n1", source="inventory",
                                              cpu_milli=8000, memory_mib=1024, num_gpu=2, gpu_model="A100")])
    w.write("decisions", [placed("A", 0, 0, BF, 1, 1.0), placed("B", 0, 0, BF, 1, 1.0, gpus=2)])
    w.write("jobs_lifecycle", [life("A", 0, "started", 1), life("A", 0, "finished", 3),
                               life("B", 0, "started", 25), life("B", 0, "finished", 28)])  # fmt: skip
    sql = m.gpu_allocation_in_sql(client, 5.0)
    assert [round(s.ratio, 6) for s in sql] == [0.2, 0, 0, 0, 0, 1.0]  # [25, 28): the last bucket is cut at 28
    assert [s.ratio for s in sql] == pytest.approx([s.ratio for s in m.gpu_allocation(client, 5.0)])


def test_a_range_counts_holdings_still_open_up_to_its_end(client: ArchiveClient) -> None:
    """A live dashboard: every GPU held since 10 s, nothing has happened since. The holdings ended at
    the archive's last lifecycle event (10), so the panel read nothing, and a range after it failed
    (WITH FILL TO below FROM)."""
    w = ArchiveWriter(client)
    w.write("nodes_telemetry", [NodeTelemetry(event_id="t", event_time=at(0), node_id="n1", source="inventory",
                                              cpu_milli=8000, memory_mib=1024, num_gpu=2, gpu_model="A100")])
    w.write("decisions", [placed("A", 0, 9, BF, 1, 1.0), placed("B", 0, 9, BF, 1, 1.0)])
    w.write("jobs_lifecycle", [life("A", 0, "started", 10), life("B", 0, "started", 10)])
    ms = lambda s: str(int(at(s).timestamp() * 1000))  # noqa: E731
    during = [r[2] for r in client.query_rows(m.gpu_allocation_sql("10", ms(0), ms(60)))[1]]
    assert during == pytest.approx([0, 1, 1, 1, 1, 1])  # from the cluster's first report (0) to the range's end (60)
    later = client.query_rows(m.gpu_allocation_sql("10", ms(3600), ms(3630)))[1]
    assert [r[2] for r in later] == pytest.approx([1, 1, 1])
    # the run's own view ends at its last event (10): no range, nothing past it
    assert m.gpu_allocation_in_sql(client, 10.0) == []


def test_a_range_reads_the_idle_buckets_before_the_first_job_as_zero(client: ArchiveClient) -> None:
    """Found by review: one holding over [100, 150) s, the cluster known since 0: a range [0, 200] had no
    buckets 0 and 50 (Grafana's mean over the range came out high), and a range [0, 90] had no data at all."""
    w = ArchiveWriter(client)
    w.write("nodes_telemetry", [NodeTelemetry(event_id="t", event_time=at(0), node_id="n1", source="inventory",
                                              cpu_milli=8000, memory_mib=1024, num_gpu=1, gpu_model="A100")])
    w.write("decisions", [placed("A", 0, 99, BF, 1, 1.0)])
    w.write("jobs_lifecycle", [life("A", 0, "started", 100), life("A", 0, "finished", 150)])
    ms = lambda s: str(int(at(s).timestamp() * 1000))  # noqa: E731

    def panel(lo: float, hi: float) -> list[tuple[float, float]]:
        rows = client.query_rows(m.gpu_allocation_sql("50", ms(lo), ms(hi)))[1]
        return [(int(r[0]) / 1000 - at(0).timestamp(), round(r[2], 6)) for r in rows]

    assert panel(0, 200) == [(0, 0), (50, 0), (100, 1), (150, 0)]
    assert panel(0, 90) == [(0, 0), (50, 0)]
    assert panel(-500, 90) == [(0, 0), (50, 0)]  # (not before the cluster's first report)


def test_deadletters_by_reason(archive: ArchiveClient) -> None:
    assert m.deadletters_by_reason(archive) == {"bad json": 2, "too large": 1}


def test_a_record_deadlettered_again_counts_once(client: ArchiveClient) -> None:
    """A record the worker read and dead-lettered again (a crash before its offset was committed) gives the
    same dead letter (scheduling/events.py ``DeadLetter.of``): one row, counted once, in a later batch too."""
    sent_ms = int(T0.timestamp() * 1000)
    w = ArchiveWriter(client)
    for _ in range(2):
        w.write("deadletter", [DeadLetter.of(b"{x", "bad json", topic="jobs.submitted", partition=0, offset=1,
                                             timestamp_ms=sent_ms)])  # fmt: skip
    assert m.deadletters_by_reason(client) == {"bad json": 1}
    assert client.query_rows("SELECT count() FROM deadletter FINAL")[1][0][0] == 1
    assert [tuple(r) for r in client.query_rows("SELECT event_time FROM deadletter FINAL")[1]] == [(T0,)]


def test_archive_metrics_bundle(archive: ArchiveClient) -> None:
    by = m.archive_metrics(archive, "policy")
    assert by[FF].stability is not None and by[FF].stability.reversals == 2
    assert by[BF].decision_latency_ms.p99 == pytest.approx(float(np.percentile([1000, 1000, 1000, 2000], 99)))


def test_empty_archive(client: ArchiveClient) -> None:
    assert m.job_metrics(client) == {} and m.decision_latency(client) == {} and m.stability(client) == {}
    assert m.gpu_allocation(client) == [] and m.gpu_allocation_in_sql(client) == []
    assert job_metrics(job_outcomes(client)).jobs == 0


def test_placements_the_fallback_heuristic_scored_are_a_group_of_their_own(client: ArchiveClient) -> None:
    """A learned worker whose Triton went down: its fallback's placements are not the model's."""
    def learned(job: str, t: float, fallback: bool, step: float) -> DecisionRecord:
        return placed(job, 0, t, "learned", 1000.0 * (1 + fallback), step).model_copy(update={"fallback": fallback})

    w = ArchiveWriter(client)
    w.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, num_gpu=1)
                               for j in ("A", "B", "C")])  # fmt: skip
    w.write("decisions", [learned("A", 1, False, 5.0), learned("B", 2, True, 6.0), learned("C", 3, True, 7.0)])
    w.write("jobs_lifecycle", [life(j, 0, s, t) for j, s, t in (("A", "started", 2), ("A", "finished", 12),
                                                                 ("B", "started", 3), ("B", "finished", 8),
                                                                 ("C", "started", 4))])  # fmt: skip
    jobs = m.job_metrics(client, "policy")
    assert set(jobs) == {"learned", "learned (fallback)"}
    assert (jobs["learned"].jobs, jobs["learned (fallback)"].jobs, jobs["learned (fallback)"].finished) == (1, 2, 1)
    assert m.decision_latency(client, "policy")["learned (fallback)"] == Distribution.of([2000, 2000])
    assert m.step_compute(client, "policy")["learned"] == Distribution.of([5.0])
    assert m.stability(client, "policy")["learned (fallback)"].placements == 2
    assert {p: job_metrics(o) for p, o in job_outcomes_by_policy(client).items()} == jobs


def test_a_step_that_fell_back_is_one_step_whatever_its_records_say(client: ArchiveClient) -> None:
    """The model call failed: the heuristic placed A (fallback) and B did not fit (its waiting
    record says nothing of the fallback). Grouped by each record's own label, the step was counted
    twice, once as the model's: now once, as the fallback's."""
    step = "c1:1:1769904000.000"
    a = placed("A", 0, 1, "learned", 10.0, 12.5).model_copy(update={"fallback": True, "step_id": step})
    b = DecisionRecord(event_id="u-b", decision_id="u-b", event_time=at(1), job_id="B", outcome="unschedulable",
                       policy="learned", latency_ms=0, step_compute_ms=12.5, step_id=step, reason="no fit")  # fmt: skip
    ArchiveWriter(client).write("decisions", [a, b])
    assert m.step_compute(client)["all"] == Distribution.of([12.5])
    assert m.step_compute(client, "policy") == {"learned (fallback)": Distribution.of([12.5])}


def test_a_policy_whose_every_step_fell_back_shows_no_step_time_not_0_ms(client: ArchiveClient) -> None:
    """One learned step placed A by the model and B by the fallback: the step is the fallback's, and
    "learned" has placements but no step. The policy table read its step p50 / p99 as 0 ms (an
    unmatched array indexes to 0, join_use_nulls or not; found by review)."""
    from storage.queries.panels import PANELS_BY_ID, expand_macros

    recs = [placed(j, 0, 5, "learned", 10.0 + fb, 7.5).model_copy(update={"fallback": fb, "step_id": "s1"})
            for j, fb in (("A", False), ("B", True))]  # fmt: skip
    ArchiveWriter(client).write("decisions", recs)
    sql = expand_macros(PANELS_BY_ID["policies.latency"].sql, at(0), at(60), 1)
    cols, rows = client.query_rows(sql)
    got = {r["policy"]: (r["step_p50_ms"], r["step_p99_ms"]) for r in (dict(zip(cols, r, strict=True)) for r in rows)}
    assert got == {"learned": (None, None), "learned (fallback)": (7.5, 7.5)}
    assert client.query_rows(sql + "\nSETTINGS join_use_nulls = 1")[1] == rows


def test_every_metric_and_panel_reads_the_same_with_join_use_nulls(archive: ArchiveClient) -> None:
    """An analyst (or a server profile) may set ``join_use_nulls = 1``: then an unmatched LEFT JOIN column is
    NULL, not its type's default (found by review: the Pending panel dropped every job never decided)."""
    from storage.queries.panels import PANELS, expand_macros

    queries = {"jobs": m.job_metrics_sql("policy"), "stability": m.stability_sql("policy"),
               "latency": m.decision_latency_sql("policy"), "steps": m.step_compute_sql("policy"),
               "gpu": m.gpu_allocation_sql("10")} | {
        p.id: expand_macros(p.sql, at(-60), at(120), 10) for p in PANELS}  # fmt: skip
    for name, sql in queries.items():
        assert archive.query_rows(sql + "\nSETTINGS join_use_nulls = 1")[1] == archive.query_rows(sql)[1], name
    pending = dict(archive.query_rows(expand_macros(next(p.sql for p in PANELS if p.id == "queue.pending"),
                                                    at(-60), at(120), 10))[1])  # fmt: skip
    assert pending[int(at(60).timestamp())] >= 1  # K3, submitted at 12 s, is never decided
