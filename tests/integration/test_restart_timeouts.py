"""A restarted worker reads the lifecycle backlog before it times out reservations (real Kafka).

It used to time out, at its first step, every reservation whose ``started`` was still on the
topic behind what it had consumed: false ``timed_out`` notices in the archive and ``explain``
("timed out … waiting to be re-placed") for jobs that had started, or finished.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.conftest import publish

pytestmark = pytest.mark.integration

BACKLOG = 3000  # lifecycle reports ahead of the job's 'started' on its partition


def test_a_restarted_worker_times_out_nothing_that_started_while_it_was_down(make_stack) -> None:  # type: ignore[no-untyped-def]
    from scheduling.events import JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for
    from streams.topics import ensure_topics

    # (10 s: the first worker is seen reserved and stopped within it; at 3 s a slow step or /status on a loaded
    # CI machine could time the reservation out before the stop: found by the flakiness review)
    p = make_stack(confirm_timeout_s=10)
    asyncio.run(ensure_topics(p.settings))
    worker = p.start_worker()  # no agents: the job stays reserved
    node = NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000, memory_mib=16384)
    job = JobSubmitted(job_id="j", cpu_milli=1000, trace_duration_s=3600)
    publish(p.settings, [node, job])
    p.wait(lambda s: s["reserved"] == 1, timeout=60, what="the job reserved")
    worker.stop()
    # while the worker is down, an agent reports other runs and then starts the job; the
    # reservation is older than the confirmation timeout by the time the worker is back
    ghosts = [JobLifecycle(job_id=f"ghost-{i}", state="finished", decision_id=f"g{i}", node_id="n1")
              for i in range(BACKLOG)]  # fmt: skip
    started = JobLifecycle(job_id="j", state="started", attempt=0, decision_id=decision_id_for("j", 0, job.event_id),
                           node_id="n1")
    publish(p.settings, [*ghosts, started])
    time.sleep(p.settings.confirm_timeout_s + 1)
    p.start_worker()
    # (the ghosts' reports name jobs this worker never saw: they wait for them, streams/early_reports.py)
    st = p.wait(lambda s: s["counters"]["lifecycle"] + s["counters"]["early_reports"] >= BACKLOG + 1
                and s["running"] == 1, timeout=120, what="the backlog read and the job running")  # fmt: skip
    assert st["early_reports"] == BACKLOG
    time.sleep(3 * p.settings.step_s + 1)  # steps after the backlog: a real timeout would have fired by now
    st = p.status() or st
    notes = st["counters"]["notes"]
    assert "timeout raced with started" not in notes and "stale timed_out" not in notes, notes
    assert (st["running"], st["reserved"], st["pending"]) == (1, 0, 0)
    assert p.sql("SELECT count() FROM jobs_lifecycle WHERE job_id = 'j' AND state = 'timed_out'") == [[0]]
