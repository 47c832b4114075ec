"""A worker killed between applying its decisions and sending their commands: its successor sends them
(``streams/uncommanded.py``), on a real broker with the simulated agents.

Before, each such job waited for the confirmation timeout, was charged a failed attempt and was placed
again. Here the timeout is longer than the test: only the successor's commands can start the jobs."""

from __future__ import annotations

import asyncio

import pytest

from ops.local_stack import LocalStack
from ops.traces import get_loader
from storage.queries import _PLACED_TWICE, _STARTED_TWICE  # the reconciliation's own SQL
from streams.command_faults import ENV as LOSE_COMMANDS
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish

pytestmark = pytest.mark.integration

N = 40
SENT = 10  # placement commands the first worker sends; it loses the others


def test_the_commands_a_killed_worker_never_sent_are_sent_by_its_successor(make_stack) -> None:  # type: ignore[no-untyped-def]
    p: LocalStack = make_stack(confirm_timeout_s=3600)
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info", env={LOSE_COMMANDS: str(SENT)})
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    jobs = [tj.event for tj in loader.jobs()]
    publish(p.settings, list(loader.nodes()))
    publish(p.settings, jobs, pause=0.02)
    p.wait(lambda s: s["finished"] == SENT and s["reserved"] == N - SENT, timeout=90,
           what=f"{SENT} jobs to finish and {N - SENT} to wait, reserved, for commands that never went out")  # fmt: skip
    p.children["worker"].kill()
    p.start_worker("--loglevel", "info")  # no fault
    st = p.wait(lambda s: s["finished"] == N, timeout=180, what="every job to finish after the restart")
    assert st["pending"] + st["running"] + st["reserved"] == 0, st
    finished = "SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'"
    assert p.wait_scalar(finished, N, timeout=60) == N
    assert p.scalar("SELECT count() FROM jobs_lifecycle WHERE state IN ('timed_out', 'failed')") == 0
    # each job started once, under its first decision: the same placement's command, sent again
    assert p.scalar("SELECT uniqExact(decision_id) FROM jobs_lifecycle WHERE state = 'started'") == N
    assert p.scalar("SELECT max(attempt) FROM jobs_lifecycle WHERE state = 'started'") == 0
    assert p.sql(_PLACED_TWICE) == []
    assert p.sql(_STARTED_TWICE) == []
    log = p.children["worker"].log_path.read_text(errors="replace")
    assert "sent the command of" in log, "the successor sent no command again"
