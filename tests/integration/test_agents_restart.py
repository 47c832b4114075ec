"""A restarted `semsched agents` process knows the nodes again and reports the runs it lost (real Kafka)."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.conftest import publish

pytestmark = pytest.mark.integration


def test_restarted_agents_know_the_nodes_and_report_the_runs_they_lost_preempted(make_stack) -> None:  # type: ignore[no-untyped-def]
    from ops.agents.recovery import LOST_REASON
    from scheduling.events import JobSubmitted, NodeTelemetry
    from streams.topics import ensure_topics

    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker()
    agents = p.start_agents("--speed", "1", "--telemetry", "1")
    node = NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000, memory_mib=16384, num_gpu=1, gpu_model="T4")
    publish(p.settings, [node, JobSubmitted(job_id="long", cpu_milli=1000, trace_duration_s=3600)])
    p.wait(lambda s: s["running"] == 1, timeout=60, what="the long job running", needs=("worker", "agents"))
    agents.stop()  # its run dies with the process
    p.start_agents("--speed", "1000", "--telemetry", "1")
    publish(p.settings, [JobSubmitted(job_id="after", cpu_milli=1000, trace_duration_s=1)])
    # the lost run is reported preempted (not the job's failure: no retry charged) and decided again;
    # the new job is placed on the node the
    # restarted agents learned from the inventory they read back (not refused as unknown)
    p.wait(lambda s: s["finished"] == 2, timeout=90, what="both jobs finished", needs=("worker", "agents"))
    # the archiver is a consumer of its own (its fetches may be held at the broker for a moment):
    # wait for both finishes (waiting for `after`'s alone, `long`'s second run was once not archived yet)
    p.wait_scalar("SELECT count() FROM jobs_lifecycle FINAL WHERE state = 'finished' "
                  "AND ((job_id = 'long' AND attempt = 1) OR job_id = 'after')", 2, 60)
    rows = p.sql("SELECT job_id, attempt, state, reason FROM jobs_lifecycle FINAL ORDER BY job_id, attempt, event_time")
    long = [(a, st, r) for j, a, st, r in rows if j == "long"]
    assert (0, "preempted", LOST_REASON) in long and (1, "finished", "") in long
    assert not any("unknown node" in r for _, _, _, r in rows)
    assert [st for j, _, st, _ in rows if j == "after"] == ["started", "finished"]
