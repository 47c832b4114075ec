"""The offset watch against the real broker and Faust's real consumer: records the worker's
consumption loses (injected with SEMSCHED_FAULT_DROP_INPUT, as Faust can drop fetched ones)
are fetched again by seeking back: the first one (revealed by where the group's consumption
starts), one in the middle (by the next offset) and the last of a burst, which nothing follows
(by the partition's end offset); every job is placed once. And a partition whose only record
is lost, with nothing after it: begun at its assignment, its end offset shows the loss."""

from __future__ import annotations

import asyncio

import pytest

from ops.traces import get_loader
from storage.queries import _PLACED_TWICE  # the reconciliation's own SQL
from streams.input_faults import ENV as FAULTS_ENV
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish

pytestmark = pytest.mark.integration

N = 20


def test_records_the_consumption_lost_are_read_again_and_every_job_is_placed_once(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    # 0 is the first (nothing committed: consumption starts there), 7 is followed by 8, and 19 is
    # the last of its burst (only the end offset shows it)
    p.start_worker("--loglevel", "info", env={FAULTS_ENV: "jobs.submitted:0,jobs.submitted:7,jobs.submitted:19"})
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    jobs = [tj.event for tj in loader.jobs()]
    publish(p.settings, list(loader.nodes()))
    bursts = ((0, 5, (1, 0)), (5, 13, (2, 0)), (13, N, (2, 1)))  # (first, end, (gaps, stalls) after it)
    for first, end, counts in bursts:  # one lost record in each: 0, 7, 19
        publish(p.settings, jobs[first:end])
        st = p.wait(lambda s, end=end: s["finished"] == end, timeout=60, what=f"jobs {first}..{end - 1}")
        assert (st["counters"]["offset_gaps"], st["counters"]["offset_stalls"]) == counts, st["counters"]
    assert st["counters"]["accepted"] == N
    log = p.children["worker"].log_path.read_text(errors="replace")
    assert "offset 0 dropped" in log and "offset 7 dropped" in log and "offset 19 dropped" in log
    # where partition 3 starts is known from its assignment, or else from its first event
    assert ("jobs.submitted partition 3: assigned; consumption starts at 0" in log
            or "jobs.submitted partition 3: first offset handled 1 (consumption starts at 0)" in log)  # fmt: skip
    assert "offsets 0..0 were skipped (never handled): seeking back to 0" in log
    assert "offsets 7..7 were skipped (never handled): seeking back to 7" in log
    assert "ends at 20 but only 18 was handled" in log
    assert p.sql(_PLACED_TWICE) == []


def test_a_partition_whose_only_record_is_lost_is_read_again(make_stack) -> None:  # type: ignore[no-untyped-def]
    """No event ever arrives on the partition, so only its start (looked up when it was assigned)
    and its end offset reveal the loss."""
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info", env={FAULTS_ENV: "jobs.submitted:0"})
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=1)
    publish(p.settings, list(loader.nodes()))
    log_path = p.children["worker"].log_path
    p.wait(lambda s: "jobs.submitted partition 3: assigned; consumption starts at 0"
           in log_path.read_text(errors="replace"), timeout=60, what="the watch begun at assignment")  # fmt: skip
    publish(p.settings, [tj.event for tj in loader.jobs()])
    st = p.wait(lambda s: s["finished"] == 1, timeout=60, what="the job whose only record was lost")
    assert (st["counters"]["offset_gaps"], st["counters"]["offset_stalls"]) == (0, 1), st["counters"]
    log = log_path.read_text(errors="replace")
    assert "offset 0 dropped" in log and "ends at 1 but only -1 was handled" in log
