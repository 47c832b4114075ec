"""Every dashboard panel's SQL (storage/queries/panels.py), with the Grafana macros expanded
for the run's time range, on the chdb archive of a short live replay (the one the metrics
agreement test uses): each returns rows, its values are in range, and its counts match."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from storage.queries import metrics as m
from storage.queries.panels import PANELS, expand_macros
from tests.integration.archive_replay import ReplayedArchive, replayed_archive

pytestmark = pytest.mark.integration

INTERVAL_S = 2


@pytest.fixture(scope="module")
def archive(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplayedArchive]:
    a = replayed_archive(kafka_broker, tmp_path_factory)
    yield a
    a.close()


@pytest.fixture(scope="module")
def results(archive: ReplayedArchive) -> dict[str, list[dict[str, Any]]]:
    """Each panel's rows for a range one second wider than the run, on both sides."""
    start = archive.first_event.replace(microsecond=0) - timedelta(seconds=1)
    end = archive.last_event.replace(microsecond=0) + timedelta(seconds=2)
    out = {}
    for p in PANELS:
        cols, rows = archive.client.query_rows(expand_macros(p.sql, start, end, INTERVAL_S))
        out[p.id] = [dict(zip(cols, r, strict=True)) for r in rows]
    return out


def _scalar(archive: ReplayedArchive, sql: str) -> Any:
    return archive.client.query_rows(sql)[1][0][0]


@pytest.mark.parametrize("panel", PANELS, ids=[p.id for p in PANELS])
def test_panel_returns_rows_in_range(results: dict[str, list[dict[str, Any]]], panel: Any) -> None:
    rows = results[panel.id]
    assert rows, f"{panel.id} returned no rows"
    for col, (lo, hi) in panel.ranges.items():
        for r in rows:
            v = r[col]
            assert v is not None and not math.isnan(v), (panel.id, col, r)
            assert (lo is None or v >= lo) and (hi is None or v <= hi), (panel.id, col, r)
    if panel.kind == "timeseries":
        assert all("time" in r for r in rows)


def test_job_panels_count_the_submissions(results: dict[str, list[dict[str, Any]]], archive: ReplayedArchive) -> None:
    (s,) = results["queue.summary"]
    a = m.job_metrics(archive.client)["all"]
    assert s["jobs"] == archive.submitted == a.jobs and s["finished"] + s["rejected"] == archive.submitted
    assert s["jct_mean"] == pytest.approx(a.jct.mean) and s["jct_p99"] == pytest.approx(a.jct.p99)
    assert s["queue_p95"] == pytest.approx(a.queueing_delay.p95) and s["makespan_s"] == pytest.approx(a.makespan_s)
    by = results["policies.jobs"]
    assert {r["policy"] for r in by} == set(archive.policies)
    assert sum(r["jobs"] for r in by) == archive.submitted
    per = m.job_metrics(archive.client, "policy")
    for r in by:
        assert r["jct_p95"] == pytest.approx(per[r["policy"]].jct.p95)
    assert {r["policy"] for r in results["policies.jct_p95"]} == set(archive.policies)


def test_rates_add_up_to_the_counts(results: dict[str, list[dict[str, Any]]], archive: ReplayedArchive) -> None:
    series = results["utilisation.throughput"]
    placed = _scalar(archive, "SELECT count() FROM decisions_applied WHERE outcome = 'placed'")
    finished = _scalar(archive, "SELECT count() FROM jobs_lifecycle FINAL WHERE state = 'finished'")
    assert sum(r["value"] for r in series if r["series"] == "placed") * INTERVAL_S == pytest.approx(placed)
    assert sum(r["value"] for r in series if r["series"] == "finished") * INTERVAL_S == pytest.approx(finished)
    assert finished == archive.submitted


def test_pending_rises_and_drains(results: dict[str, list[dict[str, Any]]], archive: ReplayedArchive) -> None:
    rows = results["queue.pending"]
    pending = [r["pending"] for r in rows]
    assert pending[0] == 0 and pending[-1] == 0  # before the first submission, after the last job settled
    assert max(pending) <= archive.submitted
    # at each of the panel's instants, at least the first attempts still waiting then: each job from its
    # submission to its first decision (re-queued attempts come on top). Whether any such wait spans
    # one of the whole-second instants depends on how fast the worker decided; where one does, the
    # panel must count it.
    _, submitted = archive.client.query_rows(
        "SELECT job_id, min(toUnixTimestamp64Milli(event_time)) FROM jobs_submitted FINAL GROUP BY job_id")
    _, decided = archive.client.query_rows(
        "SELECT job_id, min(toUnixTimestamp64Milli(event_time)) FROM ("
        " SELECT job_id, event_time FROM decisions_applied WHERE attempt = 0 AND outcome IN ('placed', 'rejected')"
        " UNION ALL SELECT job_id, event_time FROM jobs_lifecycle FINAL WHERE attempt = 0 AND state = 'rejected')"
        " GROUP BY job_id")  # fmt: skip
    until = dict(decided)
    for r in rows:
        at = _epoch_ms(r["time"])
        first = sum(1 for job, since in submitted if since <= at and (job not in until or until[job] > at))
        assert r["pending"] >= first, (r, first)


def _epoch_ms(t: Any) -> int:
    return int(t.timestamp() * 1000) if hasattr(t, "timestamp") else int(t) * 1000


def test_capacity_and_allocation(results: dict[str, list[dict[str, Any]]], archive: ReplayedArchive) -> None:
    (cap,) = results["utilisation.capacity"]
    assert (cap["nodes"], cap["gpus"]) == (1213, 6212)  # the openb cluster
    panel = results["utilisation.gpu_allocation"]
    mine = m.gpu_allocation_in_sql(archive.client, INTERVAL_S)  # the run, from its first holding to its last event
    # the panel's range starts with the cluster's first report: its idle buckets before the first job read 0
    # (none when the inventory and the first start share a bucket)
    lead = [r for r in panel if r["time"].timestamp() < mine[0].bucket_start]
    assert {r["gpu_allocation"] for r in lead} <= {0.0}, lead
    ratios = [r["gpu_allocation"] for r in panel[len(lead):]]
    # the panel's range runs 2 s past the run: its last bucket of the run is averaged over the whole
    # bucket (nothing is held after the run), the metric's over the run's part; the rest read 0
    assert ratios[: len(mine) - 1] == pytest.approx([s.ratio for s in mine][:-1])
    assert ratios[len(mine) - 1] <= mine[-1].ratio + 1e-9 and set(ratios[len(mine):]) <= {0.0}, (ratios, mine)
    assert max(ratios) > 0


def test_decision_panels_agree_with_the_metrics(results: dict[str, list[dict[str, Any]]],
                                                archive: ReplayedArchive) -> None:  # fmt: skip
    client = archive.client
    assert sum(r["steps"] for r in results["decisions.step_compute"]) == m.step_compute(client)["all"].n
    lat = m.decision_latency(client, "policy")
    stab = m.stability(client, "policy")
    for r in results["policies.latency"]:
        assert r["latency_p50_ms"] == pytest.approx(lat[r["policy"]].p50)
        assert r["placement_stability"] == pytest.approx(stab[r["policy"]].placement_stability)
    table = {r["policy"]: r for r in results["decisions.stability"]}
    assert set(table) == set(archive.policies)
    assert sum(r["placements"] for r in table.values()) == _scalar(
        archive, "SELECT count() FROM decisions_applied WHERE outcome = 'placed'")
    assert max(r["p99"] for r in results["decisions.latency"]) <= m.decision_latency(client)["all"].max


def test_deadletter_panels(results: dict[str, list[dict[str, Any]]], archive: ReplayedArchive) -> None:
    assert sum(r["messages"] for r in results["deadletters.by_reason"]) == archive.deadletters
    assert sum(r["messages"] for r in results["deadletters.over_time"]) == archive.deadletters
