"""A job's lifecycle reports that reach the worker before its submission (a restart's backlog of
submissions is longer than that of reports): they wait for the job and then move it, instead of
being taken for reports about a placement the worker never made. Before, the ``started`` was
fenced, the ``finished`` dropped, and the job was placed and run a second time."""

from __future__ import annotations

import asyncio

import pytest

from scheduling.events import JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for
from streams.topics import ensure_topics
from tests.integration.conftest import publish

pytestmark = pytest.mark.integration


def test_reports_before_the_submission_wait_for_it_and_the_job_is_not_placed_again(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker()  # no agents: any placement would show as a decision and a reservation
    node = NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000, memory_mib=16384)
    job = JobSubmitted(job_id="early", cpu_milli=1000)
    placed_by_a_worker_before = decision_id_for(job.job_id, 0, job.event_id)
    reports = [JobLifecycle(job_id=job.job_id, state=state, attempt=0, decision_id=placed_by_a_worker_before,
                            node_id="n1") for state in ("started", "finished")]  # fmt: skip
    publish(p.settings, [node, *reports])
    p.wait(lambda s: s["counters"]["early_reports"] == 2 and s["early_reports"] == 2, timeout=60,
           what="both reports held for their job")  # fmt: skip
    publish(p.settings, [job])
    st = p.wait(lambda s: s["finished"] == 1, timeout=60, what="the job finished by its held reports")
    assert st["early_reports"] == 0 and st["pending"] + st["reserved"] + st["running"] == 0, st
    assert st["counters"]["notes"].get("stale started") is None, st["counters"]["notes"]
    assert p.sql("SELECT count() FROM decisions FINAL WHERE job_id = 'early'") == [[0]]  # never placed again
    assert p.sql("SELECT count() FROM actions FINAL WHERE job_id = 'early'") == [[0]]  # and nothing fenced
