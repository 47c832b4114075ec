"""Restoring what a killed worker's tables lost (streams/log_restore.py): the input logs read back
at an assignment are applied where the tables lag, in Faust's broker-free test mode (the real
broker's read-back is tests/integration/test_log_readback.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from faust.types import TP

from scheduling.events import JobLifecycle, decision_id_for, decode, derived_event_id
from streams import log_restore
from streams.app import Worker
from streams.log_readback import Logged
from streams.log_restore import restore
from tests.streams.test_faust_agents import Sent, _submit, drive, job, placed, put, snapshot, worker

__all__ = ["worker"]  # the fixture

P = 1  # the partition of cluster "c1" among 4


def report(job_id: str, state: str, attempt: int = 0, node_id: str | None = "n1") -> bytes:
    return JobLifecycle(job_id=job_id, cluster="c1", state=state, attempt=attempt, node_id=node_id,
                        decision_id=decision_id_for(job_id, attempt, f"ev-{job_id}")).to_bytes()  # fmt: skip


def logs(submitted: list[bytes] = (), decisions: list[bytes] = (), lifecycle: list[bytes] = ()) -> Logged:  # type: ignore[assignment]
    """Per topic, ``(partition, offset, value, timestamp)``: every message on partition ``P``, from offset 0."""
    return {topic: [(P, offset, m, None) for offset, m in enumerate(ms)]
            for topic, ms in (("jobs.submitted", submitted), ("decisions", decisions), ("jobs.lifecycle", lifecycle))}  # fmt: skip


async def test_a_history_the_tables_lost_is_applied_in_passes_until_it_settles(worker: tuple[Worker, Sent]) -> None:
    # the tables came back empty; the logs say: j1 was placed, started and finished; j2 was
    # placed, failed, and placed again on n2 (that decision needs the failure before it: a second pass)
    w, sent = worker
    logged = logs(submitted=[job("j1").to_bytes(), job("j2").to_bytes()],
                  decisions=[placed("j1").to_bytes(), placed("j2").to_bytes(), placed("j2", 1, "n2").to_bytes()],
                  lifecycle=[report("j1", "started"), report("j2", "failed"), report("j1", "finished")])  # fmt: skip
    applied = await restore(w, logged)
    assert w.done["j1"]["status"] == "finished" and "j1" not in w.running and "j1" not in w.pending
    assert w.running["j2"]["attempt"] == 1 and w.running["j2"]["node_id"] == "n2"
    assert w.running["j2"]["state"] == "reserved" and w.running["j2"]["failures"] == 1
    assert applied == {"jobs.submitted": 2, "decisions": 3, "jobs.lifecycle": 3}
    assert w.counters.restored == applied
    assert sent.by_topic == {}
    before = snapshot(w)
    assert await restore(w, logged) == {}  # idempotent: nothing is lost any more
    assert snapshot(w) == before and w.counters.restored == applied


async def test_what_the_tables_hold_is_left_as_it_is(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    await _submit(w, job("j1"), job("j2"))
    async with drive(w, "decisions") as a:
        await put(a, placed("j1", node_id="n7").to_bytes(), key=b"j1")
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, report("j1", "started", node_id="n7"), key=b"j1")
        await put(a, report("j1", "finished", node_id="n7"), key=b"j1")
    before = snapshot(w)
    logged = logs(submitted=[job("j1").to_bytes(), job("j2").to_bytes()],
                  decisions=[placed("j1", node_id="n7").to_bytes(), placed("j2", 1).to_bytes(),
                             placed("j2", outcome="unschedulable", node_id=None).to_bytes()],
                  # j1's reports again: it is done (a started one must not be fenced as superseded);
                  # a rejection notice, a report of another attempt, an unknown job's
                  lifecycle=[report("j1", "started", node_id="n7"), report("j2", "rejected"),
                             report("j2", "failed", attempt=3), report("gone", "finished")])  # fmt: skip
    assert await restore(w, logged) == {}
    assert snapshot(w) == before and sent.by_topic == {}


async def test_malformed_and_misplaced_events_are_left_to_their_agents(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    elsewhere = job("j3").model_copy(update={"cluster": "c2"}).to_bytes()  # c2 is not on partition 1
    logged = logs(submitted=[b"{not json", elsewhere, job("j1").to_bytes()], decisions=[b"\xff"],
                  lifecycle=[b"[]"])  # fmt: skip
    assert await restore(w, logged) == {"jobs.submitted": 1}
    assert set(w.pending) == {"j1"} and sent.by_topic == {}


async def test_a_lost_started_report_keeps_a_running_job_from_timing_out(worker: tuple[Worker, Sent]) -> None:
    # left reserved, the confirmation timeout would re-queue j1 and place it a second time
    w, _ = worker
    await _submit(w, job("j1"))
    async with drive(w, "decisions") as a:
        await put(a, placed("j1").to_bytes(), key=b"j1")
    assert w.running["j1"]["state"] == "reserved"
    assert await restore(w, logs(lifecycle=[report("j1", "started")])) == {"jobs.lifecycle": 1}
    assert w.running["j1"]["state"] == "running"
    assert w.lifecycle_handled == {P: 1}  # the tables hold the reports read back: a step's decisions say so


async def test_a_lost_report_that_stands_for_a_lost_decision_is_applied(worker: tuple[Worker, Sent]) -> None:
    # the agent's report names the decision of the job's pending attempt: it is that placement
    w, _ = worker
    await _submit(w, job("j1"))
    assert await restore(w, logs(lifecycle=[report("j1", "started", node_id="n4")])) == {"jobs.lifecycle": 1}
    assert w.running["j1"]["node_id"] == "n4" and w.running["j1"]["state"] == "running"


async def test_a_read_back_report_of_a_job_not_yet_submitted_waits_for_the_submission(
        worker: tuple[Worker, Sent]) -> None:  # fmt: skip
    """Its submission is past the committed offset (it comes live, after the restore). Applied
    now, the report found no job: its placement was fenced and, once the job came, placed again."""
    w, sent = worker
    assert await restore(w, logs(lifecycle=[report("j1", "started", node_id="n4"), report("j1", "finished", node_id="n4")])) == {}
    assert len(w.early_reports) == 2 and sent.by_topic.get("actions", []) == []  # nothing fenced
    await _submit(w, job("j1"))
    assert len(w.early_reports) == 0 and w.done["j1"]["status"] == "finished" and "j1" not in w.running


async def test_what_a_restored_transition_publishes_is_published_first(worker: tuple[Worker, Sent]) -> None:
    # a lost last failure (max_retries=3) gives the job up: its rejection notice goes out again,
    # before the tables change (a crash in between repeats the notice, never loses it)
    w, sent = worker
    await _submit(w, job("j1"))
    for attempt in range(3):
        async with drive(w, "decisions") as a:
            await put(a, placed("j1", attempt=attempt).to_bytes(), key=b"j1")
        async with drive(w, "jobs.lifecycle") as a:
            await put(a, report("j1", "failed", attempt=attempt), key=b"j1")
    async with drive(w, "decisions") as a:
        await put(a, placed("j1", attempt=3).to_bytes(), key=b"j1")
    done_when_published: list[bool] = []
    publish = sent.publish

    async def watching(topic: str, *args: Any, **kw: Any) -> Any:
        done_when_published.append("j1" in w.done)
        return await publish(topic, *args, **kw)

    w.publish = watching  # type: ignore[method-assign]
    lost = report("j1", "failed", attempt=3)
    assert await restore(w, logs(lifecycle=[lost])) == {"jobs.lifecycle": 1}
    assert w.done["j1"]["status"] == "rejected" and done_when_published == [False]
    [notice] = sent.lifecycle()
    assert notice.state == "rejected" and notice.job_id == "j1"
    # the notice is the one the live agent published for the same report: same id, same time
    cause = decode("jobs.lifecycle", lost)
    assert notice.event_id == derived_event_id(cause.event_id, "rejected") and notice.event_time == cause.event_time


async def test_a_restored_gang_failure_fences_the_rest_of_the_gang(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    await _submit(w, job("g1", gang_id="g"), job("g2", gang_id="g"))
    async with drive(w, "decisions") as a:
        await put(a, placed("g1", node_id="n1").to_bytes(), key=b"g1")
        await put(a, placed("g2", node_id="n2").to_bytes(), key=b"g2")
    assert await restore(w, logs(lifecycle=[report("g1", "failed", node_id="n1")])) == {"jobs.lifecycle": 1}
    assert w.pending["g1"]["attempt"] == 1
    [fence] = [decode("actions", m["value"]) for m in sent.by_topic["actions"]]
    assert fence.job_id == "g2" and fence.node_id == "n2" and fence.target_decision_id == decision_id_for("g2", 0, "ev-g2")


async def test_a_long_history_is_restored_whole(worker: tuple[Worker, Sent]) -> None:
    # twelve attempts, each decision needing the failure before it (reports without a node do
    # not stand for their decision): one pass per attempt
    w, _ = worker
    w.settings.max_retries = 20
    attempts = 12
    logged = logs(submitted=[job("j1").to_bytes()],
                  decisions=[placed("j1", attempt=k).to_bytes() for k in range(attempts)],
                  lifecycle=[report("j1", "failed", attempt=k, node_id=None) for k in range(attempts - 1)])  # fmt: skip
    assert await restore(w, logged) == {"jobs.submitted": 1, "decisions": attempts, "jobs.lifecycle": attempts - 1}
    assert w.running["j1"]["attempt"] == attempts - 1 and w.running["j1"]["failures"] == attempts - 1


async def test_an_event_that_fails_to_apply_is_skipped_and_the_others_restored(worker: tuple[Worker, Sent]) -> None:
    w, _ = worker
    broken = placed("j1", node_id=None).to_bytes()  # "placed" on no node: the transition refuses it
    logged = logs(submitted=[job("j1").to_bytes(), job("j2").to_bytes()], decisions=[broken, placed("j2").to_bytes()])
    assert await restore(w, logged) == {"jobs.submitted": 2, "decisions": 1}
    assert "j1" in w.pending and w.running["j2"]["node_id"] == "n1"


async def test_a_read_back_that_hangs_is_given_up_and_the_worker_goes_on(
        worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    w, _ = worker
    await _submit(w, job("j1"))

    async def never(*args: Any) -> Logged:
        await asyncio.sleep(3600)
        return {}

    monkeypatch.setattr(log_restore, "TIMEOUT_S", 0.05)
    monkeypatch.setattr(log_restore, "read_back", never)
    await asyncio.wait_for(log_restore.restore_partitions(w, {P}), 5)  # returns: the tables stay as they are
    assert "j1" in w.pending and w.counters.restored == {}


async def test_a_long_restore_gives_the_event_loop_turns(
        worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # heartbeats and the web status run in the same loop: 3,000 events known to the tables
    w, _ = worker
    monkeypatch.setattr(log_restore, "YIELD_EVERY", 100)
    await _submit(w, *[job(f"j{i}") for i in range(1000)])
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    counting = asyncio.create_task(count_turns())
    await asyncio.sleep(0)
    logged = logs(submitted=[job(f"j{i}").to_bytes() for i in range(1000)] * 3)
    assert await restore(w, logged) == {}
    counting.cancel()
    assert turns >= 3000 // 100


def assign(w: Worker, monkeypatch: pytest.MonkeyPatch, *partitions: int) -> None:
    """The consumer's assignment: every input and changelog topic on ``partitions``."""
    names = [w.settings.topic(t) for t in ("jobs.submitted", "decisions", "jobs.lifecycle", "nodes.telemetry")]
    tps = {TP(n, p) for n in [*names, f"{w.app.conf.id}-pending-changelog"] for p in partitions}
    monkeypatch.setattr(w.app.consumer, "assignment", lambda: tps)


async def test_partitions_new_to_the_worker_are_restored_at_each_assignment(
        worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # Faust awaits both signals: on_partitions_assigned, then, after table recovery and before
    # the input streams resume, on_rebalance_complete
    w, _ = worker
    asked: list[tuple[str, set[int]]] = []

    async def read_back(settings: Any, group_id: str, partitions: set[int]) -> Logged:
        asked.append((group_id, set(partitions)))
        return logs(submitted=[job("j1").to_bytes()], decisions=[placed("j1").to_bytes()]) if P in partitions else {}

    monkeypatch.setattr(log_restore, "read_back", read_back)

    async def rebalance(*partitions: int, completed: bool = True) -> None:
        assign(w, monkeypatch, *partitions)
        await w.app.on_partitions_assigned.send(set())
        if completed:  # (a rebalance under way cancels the recovery before its signal)
            await w.app.on_rebalance_complete.send()

    await rebalance(1, 3)  # the worker starts
    assert asked == [(w.app.conf.id, {1, 3})]
    assert w.running["j1"]["decision_id"] == decision_id_for("j1", 0, "ev-j1")
    assert w.counters.restored == {"jobs.submitted": 1, "decisions": 1}
    await rebalance(0, 1, 3)  # another worker left: only its partition is new
    await rebalance(0, 1, 3)  # kept: the tables are this process's own
    await rebalance(0, 3, completed=False)  # partition 1 moves away for a generation...
    await rebalance(0, 1, 3)  # ...and comes back: another worker may have handled (and lost) its events
    assert asked[1:] == [(w.app.conf.id, {0}), (w.app.conf.id, {1})]


async def test_a_restore_cancelled_by_a_new_rebalance_is_done_again_at_the_next(
        worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # Faust cancels its recovery (our receiver with it) when another rebalance starts
    w, _ = worker
    asked: list[set[int]] = []
    hold = asyncio.Event()

    async def read_back(settings: Any, group_id: str, partitions: set[int]) -> Logged:
        asked.append(set(partitions))
        await hold.wait()
        return logs(submitted=[job("j1").to_bytes()])

    monkeypatch.setattr(log_restore, "read_back", read_back)
    assign(w, monkeypatch, 1)
    await w.app.on_partitions_assigned.send(set())
    first = asyncio.create_task(w.app.on_rebalance_complete.send())
    while not asked:
        await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert "j1" not in w.pending
    hold.set()
    await w.app.on_partitions_assigned.send(set())
    await w.app.on_rebalance_complete.send()
    assert asked == [{1}, {1}] and "j1" in w.pending


async def test_a_submission_refused_for_its_clock_is_not_restored(worker: tuple[Worker, Sent]) -> None:
    """Dead-lettered live as stamped too far ahead of the worker's clock, it stays refused when the log
    is read back (found by review: the restore scheduled it, and the archive's views hid its submission)."""
    from datetime import UTC, datetime, timedelta

    w, sent = worker
    ahead = job("j9").model_copy(update={"event_time": datetime.now(UTC) + timedelta(days=1)}).to_bytes()
    assert await restore(w, logs(submitted=[ahead, job("j1").to_bytes()])) == {"jobs.submitted": 1}
    assert set(w.pending) == {"j1"} and sent.by_topic == {}


async def test_an_event_its_dead_letter_refuses_is_not_restored_once_the_refusal_no_longer_holds(
        worker: tuple[Worker, Sent]) -> None:  # fmt: skip
    """A submission refused live for a clock 400 s ahead is no longer ahead when, minutes later, a restart
    reads the log back: its dead letter (on the same partition) keeps it refused, as the archive's views
    do (found by review: the restore scheduled it). One dead-lettered for an internal error is applied."""
    from scheduling.events import DeadLetter

    w, _ = worker
    refused, repaired = job("j9").to_bytes(), job("j8").to_bytes()
    logged = logs(submitted=[refused, repaired, job("j1").to_bytes()])
    logged["deadletter"] = [
        (P, 0, DeadLetter.of(refused, "event time is 400 s ahead of the worker's clock", topic="jobs.submitted",
                             partition=P, offset=0).to_bytes(), None),
        (P, 1, DeadLetter.of(repaired, "internal error while handling: KeyError: 'x'", topic="jobs.submitted",
                             partition=P, offset=1).to_bytes(), None),
        (P, 2, DeadLetter.of(job("j1").to_bytes(), "refused", topic="decisions", partition=P, offset=2).to_bytes(),
         None),  # another topic's position: not this submission
        (P, 3, b"not a dead letter", None)]  # fmt: skip
    assert await restore(w, logged) == {"jobs.submitted": 2}
    assert set(w.pending) == {"j8", "j1"}


async def test_a_read_back_report_held_then_failing_is_dead_lettered_under_its_records_place(
        worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: a report restored from the log and held for its job came without its offset, bytes
    and Kafka timestamp, so when handling it failed its dead letter had a new id (and time) at each try."""
    import streams.agents

    w, sent = worker
    raw, sent_ms = report("j1", "started", node_id="n4"), 1_767_225_600_000
    assert await restore(w, {**logs(), "jobs.lifecycle": [(P, 7, raw, sent_ms)]}) == {}
    [held] = w.early_reports.take("j1")

    async def fails(*args: Any, **kw: Any) -> None:
        raise RuntimeError("stood-in failure")

    monkeypatch.setattr(streams.agents, "apply_lifecycle", fails)
    await streams.agents.apply_held(w, held)
    [dl] = sent.deadletters()
    assert (dl.topic, dl.partition, dl.offset, dl.original()) == ("jobs.lifecycle", P, 7, raw)
    assert dl.event_time.timestamp() * 1000 == sent_ms
