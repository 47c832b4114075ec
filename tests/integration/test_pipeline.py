"""The control plane end to end on a real Kafka broker and a chdb archive:
N submitted → exactly N placed → N finished, and exactly N rows per table."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from ops.replay import replay
from ops.traces import get_loader
from tests.integration.conftest import FAST_AGENTS, publish

pytestmark = pytest.mark.integration

N = 60


def test_n_submitted_n_placed_n_finished_and_archived_once(make_stack, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SEMSCHED_WEB_PORT", raising=False)
    p = make_stack()
    p.start_worker("--loglevel", "info")
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    stats = asyncio.run(replay(loader, p.settings, speed=float("inf"), limit=N, strict=True, progress=False))
    assert stats.jobs == N and stats.nodes == 1213

    st = p.wait(lambda s: s["finished"] + s["rejected"] == N and s["pending"] + s["running"] + s["reserved"] == 0,
                timeout=180, what=f"{N} jobs to settle")  # fmt: skip
    assert st["finished"] == N, st
    assert st["counters"]["accepted"] == N
    assert st["counters"]["deadletters"] == 0

    # the archive: exactly N of everything (FINAL collapses redeliveries; raw counts show none)
    def eventually(query: str, expected: int) -> None:
        for _ in range(40):
            if p.scalar(query) == expected:
                return
            asyncio.run(asyncio.sleep(0.5))
        assert p.scalar(query) == expected, query

    eventually("SELECT count() FROM jobs_submitted FINAL", N)
    eventually("SELECT count() FROM decisions_applied WHERE outcome = 'placed'", N)
    eventually("SELECT uniqExact(job_id) FROM decisions_applied WHERE outcome = 'placed'", N)
    eventually("SELECT count() FROM actions FINAL WHERE kind = 'place'", N)
    eventually("SELECT count() FROM jobs_lifecycle FINAL WHERE state = 'started'", N)
    eventually("SELECT count() FROM jobs_lifecycle FINAL WHERE state = 'finished'", N)
    eventually("SELECT count() FROM nodes_telemetry FINAL WHERE source = 'inventory'", 1213)
    assert p.scalar("SELECT count() FROM jobs_submitted") == N  # no duplicate rows even before merges
    assert p.scalar("SELECT count() FROM deadletter") == 0

    # every placement went to a node of the inventory, on GPUs that node has
    bad = p.sql("""
        SELECT d.job_id, d.node_id FROM decisions_applied AS d
        LEFT JOIN (SELECT node_id, num_gpu FROM nodes_telemetry FINAL WHERE source = 'inventory') AS n
            ON d.node_id = n.node_id
        WHERE d.outcome = 'placed' AND (n.node_id = '' OR arrayExists(g -> g >= n.num_gpu, d.gpu_indices))
    """)
    assert bad == []

    # the worker serves a node's telemetry and its windowed utilisation
    node = p.sql("SELECT node_id FROM decisions_applied WHERE outcome = 'placed' LIMIT 1")[0][0]
    with urllib.request.urlopen(f"http://127.0.0.1:{p.settings.web_port}/nodes/{node}/", timeout=10) as r:
        view = json.loads(r.read())
    assert view["telemetry"]["node_id"] == node and view["telemetry"]["num_gpu"] >= 1
    assert set(view["window"]) == {"reports", "gpu_util_mean", "cpu_util_mean"}

    # `semsched sql` finds this worker by the port it advertised in its state directory (no
    # SEMSCHED_WEB_PORT), and takes the answer because it names the archive it was pointed at
    from ops.cli.db import WorkerUnavailable, query_via_worker
    from streams.settings import Settings
    from streams.web_address import advertised_port

    assert advertised_port(p.settings.state_dir) == p.settings.web_port
    cli = Settings(state_dir=p.settings.state_dir, clickhouse_url=p.settings.clickhouse_url)
    assert cli.web_port != p.settings.web_port  # (the default: only the advertised port leads there)
    assert query_via_worker(cli, "SELECT count() FROM jobs_submitted FINAL", timeout=30)[1] == [(N,)]
    elsewhere = Settings(state_dir=p.settings.state_dir / "elsewhere", web_port=p.settings.web_port,
                         clickhouse_url=p.settings.clickhouse_url)  # fmt: skip
    with pytest.raises(WorkerUnavailable, match="another archive"):  # the worker's port, another state dir
        query_via_worker(elsewhere, "SELECT 1", timeout=30)
    # /sql only reads, and answers no browser
    with pytest.raises(RuntimeError, match="INSERT is refused"):
        query_via_worker(cli, "INSERT INTO deadletter (event_id) VALUES ('x')", timeout=30)
    assert query_via_worker(cli, "SELECT count() FROM deadletter WHERE event_id = 'x'", timeout=30)[1] == [(0,)]
    page = urllib.request.Request(f"http://127.0.0.1:{p.settings.web_port}/sql", data=b"SELECT 1", method="POST",
                                  headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(page, timeout=10)
    assert refused.value.code == 403

    # the decision record carries what `explain` needs
    row = p.sql("SELECT policy, length(candidates), feasible_nodes, reason, latency_ms FROM decisions_applied "
                "WHERE outcome = 'placed' LIMIT 1")[0]  # fmt: skip
    assert row[0] == "best-fit" and row[1] >= 1 and row[2] >= 1 and "best-fit" in row[3] and row[4] >= 0


def test_dag_children_wait_for_their_parents_and_unplaceable_jobs_say_why(make_stack) -> None:  # type: ignore[no-untyped-def]
    from scheduling.events import JobSubmitted, NodeTelemetry
    from streams.topics import ensure_topics

    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker(env={"SEMSCHED_DAG_PARENT_WAIT": "5"})
    p.start_agents("--speed", "1", "--telemetry", "1")
    node = NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000, memory_mib=16384, num_gpu=1, gpu_model="T4")
    jobs = [
        JobSubmitted(job_id="child", cpu_milli=1000, dag_parents=["parent"], trace_duration_s=0.5),
        JobSubmitted(job_id="orphan", cpu_milli=1000, dag_parents=["parent", "ghost"]),  # ghost never comes
        JobSubmitted(job_id="parent", cpu_milli=1000, trace_duration_s=2),
        JobSubmitted(job_id="huge", cpu_milli=1000, num_gpu=8),  # never fits a 1-GPU cluster
        JobSubmitted(job_id="elsewhere", cluster="nowhere", cpu_milli=1000),  # no nodes in its cluster
        # a gang that fits runs whole; a gang with a member that never fits is rejected whole
        JobSubmitted(job_id="g-0", gang_id="g", gang_size=2, cpu_milli=1000, trace_duration_s=0.5),
        JobSubmitted(job_id="g-1", gang_id="g", gang_size=2, cpu_milli=1000, trace_duration_s=0.5),
        JobSubmitted(job_id="h-0", gang_id="h", gang_size=2, cpu_milli=1000),
        JobSubmitted(job_id="h-1", gang_id="h", gang_size=2, cpu_milli=1000, num_gpu=4),
    ]  # fmt: skip

    publish(p.settings, [node, *jobs])
    p.wait(lambda s: s["finished"] == 4 and s["rejected"] == 4, timeout=90, what="parent, child, gangs, rejections")
    # the archiver is a consumer of its own and may lag the worker's status: read once it holds them all
    # (a read before the rejections landed saw only the jobs' waiting notes)
    assert p.wait_scalar("SELECT uniqExact(job_id) FROM decisions_applied WHERE outcome = 'rejected'", 4, 60) == 4
    assert p.wait_scalar("SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'", 4, 60) == 4
    started = dict(p.sql("SELECT job_id, min(event_time) FROM jobs_lifecycle FINAL WHERE state = 'started' "
                         "GROUP BY job_id"))  # fmt: skip
    finished = dict(p.sql("SELECT job_id, min(event_time) FROM jobs_lifecycle FINAL WHERE state = 'finished' "
                          "GROUP BY job_id"))  # fmt: skip
    assert started["child"] >= finished["parent"]  # ISO strings of one format compare as times
    reasons = dict(p.sql("SELECT job_id, groupArray(reason) FROM decisions_applied WHERE outcome != 'placed' "
                         "GROUP BY job_id"))  # fmt: skip
    assert any("waiting for DAG parent(s) parent" in r for r in reasons["child"])
    # a parent never submitted: the job waits, says so, and is rejected after SEMSCHED_DAG_PARENT_WAIT
    assert any("(ghost not submitted yet: rejected 5 s after this job)" in r for r in reasons["orphan"])
    assert any("DAG parent(s) ghost never submitted to cluster 'default' within 5 s" in r for r in reasons["orphan"])
    assert "orphan" not in started
    assert any("can never run" in r and "GPU" in r for r in reasons["huge"])
    assert any("no nodes known in cluster 'nowhere'" in r for r in reasons["elsewhere"])
    assert p.status()["pending"] == 1  # 'elsewhere' waits, it is not lost
    assert started["g-0"] and started["g-1"]
    assert {"h-0", "h-1"} <= set(reasons) and all(
        any("can never run" in r for r in reasons[j]) for j in ("h-0", "h-1"))
