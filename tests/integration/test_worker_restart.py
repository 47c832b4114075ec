"""A worker killed (SIGKILL) in the middle of a replay and started again: its tables come
back from their changelogs, uncommitted events are re-read, and still no job is lost and
none is placed or started twice."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from aiokafka import TopicPartition

from ops.local_stack import LocalStack
from ops.traces import get_loader
from storage.queries import _PLACED_TWICE, _STARTED_TWICE  # the reconciliation's own SQL
from streams.changelog_faults import ENV as LOSE_CHANGELOG
from streams.offset_starts import committed_offsets
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish, topic_records

pytestmark = pytest.mark.integration

N = 150
KILL_AFTER = 60


def test_worker_killed_mid_replay_loses_nothing_and_places_nothing_twice(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info")
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    nodes = list(loader.nodes())
    jobs = [tj.event for tj in loader.jobs()]
    assert len(jobs) == N

    publish(p.settings, nodes)
    publish(p.settings, jobs[:KILL_AFTER], pause=0.05)
    p.wait(lambda s: s["counters"]["decisions_applied"] >= 20, timeout=60, what="the first placements")
    _wait_for_commits(p.settings)  # so the restarted worker has logs to read back (streams/log_restore.py)
    p.children["worker"].kill()  # no goodbye: no flush, no commit
    # submissions keep coming while no worker runs
    publish(p.settings, jobs[KILL_AFTER:2 * KILL_AFTER], pause=0.02)
    time.sleep(1)
    p.start_worker("--loglevel", "info")
    publish(p.settings, jobs[2 * KILL_AFTER:], pause=0.02)

    try:
        st = p.wait(lambda s: s["finished"] + s["rejected"] == N and s["pending"] + s["running"] + s["reserved"] == 0,
                    timeout=240, what=f"all {N} jobs to settle after the restart")  # fmt: skip
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{_which_went_missing(p, [j.job_id for j in jobs])}") from None
    assert st["finished"] == N, st

    # the restarted worker's archiver rejoins its group after the killed one's session ends: it
    # may still be reading when the tables have settled
    finished = "SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'"
    assert p.wait_scalar(finished, N, timeout=60) == N
    assert p.scalar("SELECT uniqExact(job_id) FROM jobs_submitted FINAL") == N
    assert p.sql(_PLACED_TWICE) == []
    assert p.sql(_STARTED_TWICE) == []
    # each job started exactly once over the whole run, whatever was redelivered
    twice = [r[0] for r in p.sql("SELECT job_id FROM jobs_lifecycle WHERE state = 'started' GROUP BY job_id "
                                 "HAVING uniqExact(decision_id) > 1")]  # fmt: skip
    assert twice == [], _histories(p, twice)
    # both workers read their input logs back at each assignment, after recovery and before
    # scheduling started (streams/log_restore.py); the log holds both workers' lives
    log = p.children["worker"].log_path.read_text(errors="replace")
    assert "could not read the input logs back" not in log and "restoring from the logs failed" not in log
    restored, openings = False, 0
    for line in log.splitlines():
        if "logs read back (jobs.submitted" in line:
            restored = True
        elif "caught up on" in line and "scheduling starts" in line:
            assert restored, f"scheduling started before the logs were read back: {line}"
            restored, openings = False, openings + 1
    assert openings >= 2
    # the restarted worker's read covered what the killed one had committed
    submitted, decided = map(int, re.findall(r"logs read back \(jobs.submitted (\d+), decisions (\d+)", log)[-1])
    assert submitted > 0 and decided > 0


def _wait_for_commits(settings: Settings, at_least: dict[str, int] | None = None, timeout: float = 30.0) -> dict[str, int]:
    """Until the worker group has committed at least ``at_least`` offsets per topic (summed over
    the partitions; default: some on jobs.submitted and decisions); returns the sums."""
    want = at_least or {"jobs.submitted": 1, "decisions": 1}
    tps = [TopicPartition(settings.topic(t), q) for t in want for q in range(settings.partitions)]
    deadline = time.monotonic() + timeout
    while True:
        done = asyncio.run(committed_offsets(settings, f"{settings.topic_prefix}worker", tps))
        sums = {t: sum(off for tp, off in done.items() if tp.topic == settings.topic(t)) for t in want}
        if all(sums[t] >= n for t, n in want.items()):
            return sums
        assert time.monotonic() < deadline, f"the worker group committed {sums} in {timeout:.0f} s, not {want}"
        time.sleep(0.5)


def test_a_worker_killed_with_its_changelog_writes_lost_is_restored_from_the_input_logs(make_stack) -> None:  # type: ignore[no-untyped-def]
    # the worker's job-table writes stop reaching the broker after the first 60 (about ten jobs'
    # worth) while its input offsets are committed, as when Faust commits before the writes land;
    # killed, its successor recovers tables that lack the rest and must restore them from the
    # input logs, or it loses accepted jobs and places started ones a second time
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info", env={LOSE_CHANGELOG: "60"})
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=80)
    jobs = [tj.event for tj in loader.jobs()]
    publish(p.settings, list(loader.nodes()))
    publish(p.settings, jobs[:60], pause=0.02)
    p.wait(lambda s: s["finished"] >= 30 and s["counters"]["decisions_applied"] >= 50, timeout=90,
           what="the first jobs to finish")  # fmt: skip
    _wait_for_commits(p.settings, {"jobs.submitted": 60, "decisions": 50, "jobs.lifecycle": 60})
    p.children["worker"].kill()
    p.start_worker("--loglevel", "info")  # no fault
    publish(p.settings, jobs[60:], pause=0.02)
    st = p.wait(lambda s: s["finished"] + s["rejected"] == len(jobs) and s["pending"] + s["running"] + s["reserved"] == 0,
                timeout=180, what="all jobs to settle after the restart")  # fmt: skip
    assert st["finished"] == len(jobs), st
    restored = st["counters"]["restored"]
    assert restored.get("jobs.submitted", 0) > 0 and restored.get("decisions", 0) > 0, restored
    assert restored.get("jobs.lifecycle", 0) > 0, restored
    finished = "SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'"
    assert p.wait_scalar(finished, len(jobs), timeout=60) == len(jobs)
    assert p.sql(_PLACED_TWICE) == []
    assert p.sql(_STARTED_TWICE) == []


def test_a_cleanly_restarted_worker_schedules_again(make_stack) -> None:  # type: ignore[no-untyped-def]
    # after a clean stop the group has committed every decision: nothing comes back on the
    # decisions topic, and the restart gate must not wait for it
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker()
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=10)
    jobs = [tj.event for tj in loader.jobs()]

    publish(p.settings, [*loader.nodes(), *jobs[:5]])
    p.wait(lambda s: s["finished"] == 5, timeout=60, what="the first five jobs")
    p.children["worker"].stop()  # SIGTERM: Faust commits its offsets on the way out
    time.sleep(4)  # past Faust's commit interval either way
    p.start_worker()
    publish(p.settings, jobs[5:])
    st = p.wait(lambda s: s["finished"] == 10, timeout=90, what="the jobs submitted after the restart")
    assert st["pending"] == 0


def _which_went_missing(p: LocalStack, job_ids: list[str]) -> str:
    """For a run that did not settle: the jobs never finished, where each is on the topic (or that
    it never reached it), and what the worker's offset watch logged."""
    on_topic = topic_records(p.settings, "jobs.submitted")
    finished = {r[0] for r in p.sql("SELECT DISTINCT job_id FROM jobs_lifecycle FINAL WHERE state = 'finished'")}
    missing = [j for j in job_ids if j not in finished]
    where = {j: on_topic.get(j, "NOT ON THE TOPIC") for j in missing}
    log = p.children["worker"].log_path.read_text(errors="replace").splitlines()
    watch = [line for line in log if "first offset handled" in line or "seek" in line]
    return (f"{len(on_topic)} submissions on jobs.submitted; not finished (partition, offset): {where}\n"
            "worker offset watch:\n" + "\n".join(watch))


def _histories(p: LocalStack, job_ids: list[str]) -> str:
    """For jobs started under more than one decision: every decision, action and lifecycle event
    of each, in time order, and the worker's log lines that name it."""
    log = p.children["worker"].log_path.read_text(errors="replace").splitlines()
    out = []
    for job in job_ids[:3]:
        rows = p.sql(f"""
            SELECT toString(event_time), 'decision', toString(attempt), outcome, ifNull(node_id, ''), reason, decision_id
            FROM decisions WHERE job_id = '{job}'
            UNION ALL SELECT toString(event_time), 'action', toString(attempt), kind, ifNull(node_id, ''), '', decision_id
            FROM actions WHERE job_id = '{job}'
            UNION ALL SELECT toString(event_time), 'lifecycle', toString(attempt), state, ifNull(node_id, ''), reason,
                             ifNull(decision_id, '')
            FROM jobs_lifecycle WHERE job_id = '{job}'
            ORDER BY 1""")
        out.append(f"{job}:\n" + "\n".join("  " + " | ".join(map(str, r)) for r in rows))
        out.append("  worker log: " + "\n  ".join(line for line in log if job in line)[-3000:])
    return f"{len(job_ids)} job(s) started under two decisions\n" + "\n".join(out)

