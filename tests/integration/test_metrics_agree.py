"""The archive's SQL metrics (storage/queries/metrics.py) equal scheduling.metrics computed on
the same events: real openb pods replayed through the live pipeline (Kafka broker, worker
under two policies, simulated agents that fail some jobs, chdb archive)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from scheduling.metrics import Distribution, JobMetrics, job_metrics, placement_stability
from storage.queries import metrics as m
from storage.queries import reconcile, summary
from storage.queries.outcomes import job_outcomes, job_outcomes_by_policy
from tests.integration.archive_replay import ReplayedArchive, replayed_archive

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def archive(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplayedArchive]:
    a = replayed_archive(kafka_broker, tmp_path_factory)
    yield a
    a.close()


# "To rounding": the Python side subtracts epoch seconds held as floats (about 2e-7 s of
# resolution in 2026), ClickHouse subtracts integer milliseconds.
TOL = {"rel": 1e-6, "abs": 1e-6}


def _same(sql: JobMetrics, py: JobMetrics) -> None:
    a, b = sql.as_row(), py.as_row()
    assert a.keys() == b.keys()
    for k in a:
        assert (a[k] is None) == (b[k] is None), k
        if a[k] is not None:
            assert a[k] == pytest.approx(b[k], **TOL), k


def test_sql_job_metrics_equal_scheduling_metrics_on_the_same_events(archive: ReplayedArchive) -> None:
    client = archive.client
    sql = m.job_metrics(client)["all"]
    py = job_metrics(job_outcomes(client))
    print("\nall:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in sql.as_row().items()})
    _same(sql, py)
    by_sql = m.job_metrics(client, "policy")
    by_py = {p: job_metrics(o) for p, o in job_outcomes_by_policy(client).items()}
    assert set(by_sql) == set(by_py) == set(archive.policies)
    for p in by_sql:
        print(f"{p}:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in by_sql[p].as_row().items()})
        _same(by_sql[p], by_py[p])


def test_sql_metrics_are_sane(archive: ReplayedArchive) -> None:
    client = archive.client
    a = m.job_metrics(client)["all"]
    assert a.jobs == archive.submitted
    assert a.finished + a.rejected == archive.submitted and a.unfinished == 0
    for o in job_outcomes(client):
        assert o.queueing_delay is not None and o.queueing_delay >= 0, o
        if o.jct is not None:
            assert o.jct >= o.queueing_delay, o
    assert a.jct.p50 <= a.jct.p95 <= a.jct.p99 <= a.jct.max  # type: ignore[operator]
    assert a.jct.mean >= a.queueing_delay.mean >= 0  # type: ignore[operator]
    assert a.makespan_s >= a.jct.max and a.throughput_jobs_per_s > 0  # type: ignore[operator]
    assert a.placement_rate_per_s >= a.throughput_jobs_per_s  # type: ignore[operator]
    by = m.job_metrics(client, "policy")
    assert sum(x.jobs for x in by.values()) == archive.submitted
    assert reconcile(client).ok
    s = summary(client, bucket_s=1.0)
    assert s.submitted == archive.submitted and s.jct_mean_s == pytest.approx(a.jct.mean)
    assert sum(s.deadletters_by_reason.values()) == archive.deadletters == sum(m.deadletters_by_reason(client).values())
    # the demo's last screen renders it
    from rich.console import Console

    from ops.summary_view import print_summary

    console = Console(file=io.StringIO(), width=120)
    print_summary(console, s, wall_s=1.0)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "JCT mean / p95" in text and f"{a.jct.mean:,.1f} s" in text and "GPU allocation over time" in text


def test_decision_latency_and_step_compute_agree_with_distribution(archive: ReplayedArchive) -> None:
    client = archive.client
    raw = [r[0] for r in client.query_rows("SELECT latency_ms FROM decisions_applied WHERE outcome = 'placed'")[1]]
    lat = m.decision_latency(client)["all"]
    assert lat.n == len(raw) > 0 and all(x >= 0 for x in raw)
    assert _approx(lat, Distribution.of(raw))
    rows = client.query_rows("SELECT cluster, policy, step_id, step_compute_ms FROM decisions_applied "
                             "WHERE step_compute_ms > 0")[1]  # fmt: skip
    assert all(step for _, _, step, _ in rows)  # every record names its step
    steps = m.step_compute(client, "policy")
    for policy in archive.policies:
        # one value per step (its records repeat it); two steps may well take the same time
        mine = {(c, step): ms for c, p, step, ms in rows if p == policy}
        assert _approx(steps[policy], Distribution.of(mine.values())), policy
    print(f"\ndecision latency ms: {lat}\nstep compute ms: {steps}")


def _approx(a: Distribution, b: Distribution) -> bool:
    return a.n == b.n and all(
        (x is None and y is None) or (x is not None and y is not None and x == pytest.approx(y, rel=1e-9))
        for x, y in ((a.mean, b.mean), (a.p50, b.p50), (a.p95, b.p95), (a.p99, b.p99), (a.max, b.max))
    )


def test_placement_stability_counts_the_re_queued_failures(archive: ReplayedArchive) -> None:
    client = archive.client
    st = m.stability(client)["all"]
    _, [(failed_attempts,)] = client.query_rows(
        "SELECT uniqExact(job_id, attempt) FROM jobs_lifecycle FINAL WHERE state = 'failed'")
    _, [(placed,)] = client.query_rows("SELECT count() FROM decisions_applied WHERE outcome = 'placed'")
    print(f"\nstability: {st}")
    # the agents fail jobs (--fail-rate); every failure re-queues (or gives up): one reversal each
    assert failed_attempts > 0 and st.reversals == failed_attempts
    assert st.placements == placed
    assert st.reversals_by_cause.get("failed") == failed_attempts
    assert st.placement_stability == pytest.approx(placement_stability(st.placements, st.reversals))
    assert 0 < st.placement_stability < 1  # type: ignore[operator]


@pytest.mark.parametrize("bucket_s", [1.0, 5.0])
def test_gpu_allocation_sql_equals_allocation_over_time(archive: ReplayedArchive, bucket_s: float) -> None:
    client = archive.client
    py = m.gpu_allocation(client, bucket_s)
    sql = m.gpu_allocation_in_sql(client, bucket_s)
    assert len(py) > 1
    assert [s.bucket_start for s in sql] == pytest.approx([s.bucket_start for s in py])
    # SQL cuts buckets on whole milliseconds, Python on float seconds: a bucket edge that
    # splits a holding can differ by a fraction of a millisecond of it
    assert [s.ratio for s in sql] == pytest.approx([s.ratio for s in py], rel=1e-4, abs=1e-12)
    assert all(0 <= s.ratio <= 1 for s in sql) and max(s.ratio for s in sql) > 0
    assert sql[0].capacity_milli == 6212 * 1000  # the openb cluster's GPUs
