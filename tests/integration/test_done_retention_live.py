"""Done jobs forgotten on a real broker (``streams/done_retention.py``): the worker deletes them with
tombstones after raising their partition's watermark, a restarted worker recovers none of them, and its
restore from the input logs, which reads their submissions back, does not take them for lost jobs and
run them a second time."""

from __future__ import annotations

import asyncio
import time

import pytest

from ops.traces import get_loader
from storage.queries import _PLACED_TWICE, _STARTED_TWICE  # the reconciliation's own SQL
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish
from tests.integration.test_worker_restart import _wait_for_commits

pytestmark = pytest.mark.integration

N = 20
SHORT = {"SEMSCHED_DONE_RETENTION": "4", "SEMSCHED_MAX_CLOCK_SKEW": "1"}
# the restart reads back every submission but only the latest reports (a job has two or three), as a
# long-running worker's window holds more jobs' submissions than their reports: a job restored from
# its submission with its end out of the window would be placed again
WINDOW = {"SEMSCHED_RESTORE_WINDOW": str(N)}


def test_forgotten_jobs_stay_forgotten_across_a_restart_and_run_once(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info", env=SHORT)
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    jobs = [tj.event for tj in loader.jobs()]
    publish(p.settings, list(loader.nodes()))
    publish(p.settings, jobs, pause=0.02)
    st = p.wait(lambda s: s["counters"]["done_forgotten"] == N and s["finished"] + s["rejected"] == 0
                and s["pending"] + s["running"] + s["reserved"] == 0,
                timeout=120, what=f"all {N} jobs to finish and be forgotten")  # fmt: skip
    assert st["counters"]["accepted"] == N, st
    _wait_for_commits(p.settings, {"jobs.submitted": N})  # so the restart reads the submissions back
    p.children["worker"].kill()
    p.start_worker("--loglevel", "info", env={**SHORT, **WINDOW})
    p.wait(lambda s: bool(s["owned_partitions"]), timeout=90, what="the restarted worker to take its partitions")
    time.sleep(5)  # (its restore ran before it took them: a job wrongly restored would be placed by now)
    st = p.wait(lambda s: True, timeout=5, what="its status")
    assert st["counters"]["restored"].get("jobs.submitted", 0) == 0, st["counters"]
    assert st["finished"] + st["rejected"] + st["pending"] + st["running"] + st["reserved"] == 0, st
    log = p.children["worker"].log_path.read_text(errors="replace")
    assert "jobs.submitted event(s) read back not restored: sent before their partition's forgotten watermark" in log
    assert p.wait_scalar("SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'", N,
                         timeout=60) == N  # fmt: skip
    assert p.sql(_PLACED_TWICE) == []
    assert p.sql(_STARTED_TWICE) == []
