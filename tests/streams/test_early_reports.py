"""streams/early_reports.py: reports held per job, handed back in their order, expired by age."""

from __future__ import annotations

from scheduling.events import JobLifecycle
from streams.early_reports import EarlyReports


def _report(job: str, state: str) -> JobLifecycle:
    return JobLifecycle(job_id=job, state=state, decision_id=f"d-{job}", node_id="n")  # type: ignore[arg-type]


def test_reports_are_held_per_job_and_taken_back_in_order() -> None:
    held = EarlyReports(max_age_s=10)
    assert held.hold(_report("a", "started"), 1, now=0.0) and held.hold(_report("b", "started"), 2, now=1.0)
    assert held.hold(_report("a", "finished"), 1, now=2.0)
    assert len(held) == 3
    assert [(r.event.state, r.partition) for r in held.take("a")] == [("started", 1), ("finished", 1)]
    assert held.take("a") == [] and len(held) == 1


def test_a_job_whose_first_report_waited_too_long_expires_whole() -> None:
    held = EarlyReports(max_age_s=10)
    held.hold(_report("a", "started"), 0, now=0.0)
    held.hold(_report("b", "started"), 0, now=5.0)
    held.hold(_report("a", "finished"), 0, now=9.0)
    assert held.expired(now=9.9) == []
    assert [(r.event.job_id, r.event.state) for r in held.expired(now=10.0)] == [("a", "started"), ("a", "finished")]
    assert len(held) == 1 and [r.event.job_id for r in held.expired(now=15.0)] == ["b"]


def test_beyond_its_limit_a_report_is_not_held() -> None:
    held = EarlyReports(max_age_s=10, limit=1)
    assert held.hold(_report("a", "started"), 0, now=0.0)
    assert not held.hold(_report("b", "started"), 0, now=0.0) and len(held) == 1


def test_the_reports_of_partitions_assigned_elsewhere_are_let_go_and_never_expire_here() -> None:
    """Found by review: a report held for a partition that moved to another worker expired here later; a
    ``started`` of a job this worker never learnt of then fenced the run the new owner had placed. The
    assignment lets them go (the new owner reads them back with its log restore). Not the revocation: a
    rebalance revokes every partition, also those that come straight back (their reports must stay)."""
    import asyncio

    from faust.types import TP

    from tests.streams.loop_helpers import stood_in_worker

    async def run() -> None:
        w, _ = stood_in_worker()
        held = w.early_reports
        held.hold(_report("a", "started"), 1, now=0.0)
        held.hold(_report("b", "started"), 2, now=0.0)
        held.hold(_report("a", "finished"), 1, now=1.0)
        lifecycle, decisions = w.settings.topic("jobs.lifecycle"), w.settings.topic("decisions")
        everything = {TP(lifecycle, 1), TP(lifecycle, 2), TP(decisions, 1), TP(decisions, 2)}
        await w.app.on_partitions_revoked.send(everything)  # a rebalance takes all ...
        await w.app.on_partitions_assigned.send(everything)  # ... and gives them back
        assert len(held) == 3
        await w.app.on_partitions_assigned.send({TP(lifecycle, 2), TP(decisions, 1)})  # partition 1 went
        assert len(held) == 1
        w.app.consumer.assignment = lambda: set()  # type: ignore[method-assign]  # in a rebalance: none expires
        assert held.expired(now=1e9, partitions=set()) == [] and len(held) == 1
        assert [r.event.job_id for r in held.expired(now=1e9, partitions={2})] == ["b"]

    asyncio.run(run())
