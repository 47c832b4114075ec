"""Agents that die with their node (real Kafka): the worker marks the node they fell silent about
unhealthy, moves the job running there off it, and takes the node back when agents report it
again (streams/silent_nodes.py, streams/lost_nodes.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.conftest import publish

pytestmark = pytest.mark.integration


def test_a_node_whose_agents_fall_silent_loses_its_job_and_comes_back_with_them(make_stack) -> None:  # type: ignore[no-untyped-def]
    from scheduling.events import JobSubmitted, NodeTelemetry
    from streams.topics import ensure_topics

    # (over the agents' 10 s report interval, which is 10-11 s between reports, by 5 s: a stall of the agents on a
    # loaded CI machine is not a silence; at 12 s, 1-2 s of slack was left: found by the flakiness review)
    p = make_stack(node_silent_s=16.0, node_lost_s=0.0)
    asyncio.run(ensure_topics(p.settings))
    p.start_worker()
    agents = p.start_agents("--speed", "1", "--telemetry", "1")
    node = NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000, memory_mib=16384, num_gpu=1, gpu_model="T4")
    publish(p.settings, [node, JobSubmitted(job_id="long", cpu_milli=1000, trace_duration_s=3600)])
    p.wait(lambda s: s["running"] == 1, timeout=60, what="the long job running")
    assert p.wait_scalar("SELECT count() > 0 FROM nodes_telemetry WHERE node_id = 'n1' AND source = 'agent'", 1, 60) == 1
    # alive, its agents report it every 10 s or sooner, nothing changing on it: not marked
    time.sleep(18)
    [(early,)] = p.sql("SELECT count() FROM nodes_telemetry WHERE node_id = 'n1' AND source = 'worker'")
    assert early == 0
    agents.stop()  # nothing reports n1 any more
    assert p.wait_scalar("SELECT count() FROM nodes_telemetry WHERE node_id = 'n1' AND source = 'worker' "
                         "AND NOT healthy", 1, 60) == 1  # fmt: skip
    assert p.wait_scalar("SELECT count() FROM jobs_lifecycle FINAL WHERE job_id = 'long' AND state = 'preempted'",
                         1, 60) == 1  # fmt: skip
    [(reason,)] = p.sql("SELECT reason FROM jobs_lifecycle FINAL WHERE job_id = 'long' AND state = 'preempted'")
    assert reason.startswith("node n1 silent (no report from its agent), marked unhealthy for"), reason
    p.wait(lambda s: s["pending"] == 1 and s["running"] == 0, timeout=30, what="the job back in the queue")
    # agents again: n1 is reported healthy, and the job runs there to the end (its second attempt)
    p.start_agents("--speed", "1000", "--telemetry", "1")
    p.wait(lambda s: s["finished"] == 1, timeout=90, what="the job finished")
    # (the archiver is a consumer of its own: the finish may not be archived yet when the worker has it)
    assert p.wait_scalar("SELECT count() FROM jobs_lifecycle FINAL WHERE job_id = 'long' AND state = 'finished'",
                         1, 60) == 1  # fmt: skip
    rows = [tuple(r) for r in p.sql("SELECT attempt, state FROM jobs_lifecycle FINAL WHERE job_id = 'long'")]
    assert (0, "preempted") in rows and (1, "finished") in rows, rows
    [(marks,)] = p.sql("SELECT count() FROM nodes_telemetry WHERE node_id = 'n1' AND source = 'worker'")
    assert marks == 1  # one silence, marked once
