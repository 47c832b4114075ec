"""Placements reserved without a command on the way get it from the partition's owner (``streams/uncommanded.py``),
on the real worker loop and agents with the broker stood in.

Before, a job whose decision was applied but whose command never went out (its worker died in between, or a
rebalance stopped waiting for its step) waited for the confirmation timeout, and was charged a failed attempt."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from scheduling.events import DecisionRecord, decode
from streams.state import on_decision, on_submitted
from streams.uncommanded import RESEND_MARGIN_S
from tests.streams.loop_helpers import C1, c1_node, stood_in_worker
from tests.streams.test_faust_agents import Sent, _submit, drive, job, placed, put
from tests.streams.test_loop_rebalance import SlowBroker, step_awaiting_the_broker, worker_on_c1


def decided_now(job_id: str) -> DecisionRecord:
    """Placed on n1 just now (a reservation older than the confirmation timeout is timed out instead)."""
    return placed(job_id).model_copy(update={"event_time": datetime.now(UTC)})


def commands(sent: Sent) -> list[tuple[str, str, str, list[int]]]:
    """The placement commands sent: (job, decision id, node, GPUs)."""
    out = []
    for s in sent.by_topic.get("actions", []):
        cmd = decode("actions", s["value"])
        out.append((cmd.job_id, cmd.decision_id, cmd.node_id, list(cmd.gpu_indices)))  # type: ignore[union-attr]
    return out


def on_a_stood_in_worker(sent: Sent) -> tuple[Any, Any]:
    """A stood-in worker publishing to ``sent``, whose agents can be driven (``drive``): (worker, its loop)."""
    w, _ = stood_in_worker(sent.publish, policy="best-fit")
    drivable(w, sent)
    return w, w.loop  # type: ignore[attr-defined]


def drivable(w: Any, sent: Sent) -> None:
    """Let the agents of a stood-in worker be driven: the tables' changelog as in Faust's test mode (the
    agents' writes need its answer), consumption starting from the first event."""
    for table in (w.pending, w.running, w.done, w.forgotten):
        del table.send_changelog
    w.app.consumer.seek = sent.seek
    w.offset_starts = sent


def test_a_reservation_held_at_an_assignment_is_commanded_once_the_gates_open() -> None:
    """The partition's previous owner applied the decision (its changelog has it) and died before the
    command went out: the new owner sends it, once."""
    sent = Sent()

    async def go() -> None:
        w, loop = on_a_stood_in_worker(sent)
        w.nodes.data["n1"] = c1_node("n1", num_gpu=4)
        rec = decided_now("j1")
        pending = on_submitted(job("j1"), None, 0.0)
        w.apply(pending, partition=C1)
        w.apply(on_decision(rec, pending.pending["j1"]), partition=C1)  # as recovered from the changelog
        await loop.tick()  # (a worker's first steps follow an assignment)
        assert commands(sent) == [("j1", rec.decision_id, "n1", [2])]
        assert not [s for s in sent.by_topic.get("decisions", []) if decode("decisions", s["value"]).job_id == "j1"]
        await loop.tick()
        assert len(commands(sent)) == 1  # once
        await loop._on_partitions_assigned(w.app)  # the next assignment looks again (the agent has it: a duplicate)
        await loop.tick()
        assert len(commands(sent)) == 2
        loop.timed_out.add(rec.decision_id)  # given up on: no command
        await loop._on_partitions_assigned(w.app)
        await loop.tick()
        assert len(commands(sent)) == 2

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_late_decision_read_from_the_topic_that_reserves_its_job_gets_its_command() -> None:
    """A step the rebalance stopped waiting for published its decision after this worker, the new owner,
    had caught up: it reserves the job here, and that step sent no command."""
    sent = Sent()

    async def go() -> None:
        w, loop = on_a_stood_in_worker(sent)  # no node known here: this worker places nothing itself
        await _submit(w, job("j1"))
        await loop.tick()  # caught up
        async with drive(w, "decisions") as a:
            await put(a, decided_now("j1").to_bytes(), key=b"j1")
        assert w.running["j1"]["state"] == "reserved" and commands(sent) == []
        await loop.tick()
        assert commands(sent) == [("j1", placed("j1").decision_id, "n1", [2])]
        await loop.tick()
        assert len(commands(sent)) == 1

    asyncio.run(asyncio.wait_for(go(), 30))


async def read_back_while_the_step_waits(broker: SlowBroker, edit: Callable[[DecisionRecord], DecisionRecord]
                                        ) -> tuple[Any, DecisionRecord]:  # fmt: skip
    """A worker's step places j1 and waits for the broker; meanwhile the consumer reads ``edit(its decision)``
    from the topic; then the broker answers, the step ends, and the next tick runs: (worker, its decision)."""
    w, _, loop = worker_on_c1(broker, "j1")
    drivable(w, Sent())
    step = await step_awaiting_the_broker(loop, broker)
    [mine] = [e for e in broker.sent if e.kind == "decision"]
    async with drive(w, "decisions") as a:
        await put(a, edit(mine).to_bytes(), key=b"j1")
    broker.release()
    await step
    await loop.tick()
    return w, mine


def test_this_workers_own_decision_read_back_before_its_step_ended_sends_one_command() -> None:
    """The consumer may read a step's decision back before the broker's acknowledgement reaches the step:
    the step sends its command; the read-back is not a placement without one."""
    broker = SlowBroker()
    _, mine = asyncio.run(asyncio.wait_for(read_back_while_the_step_waits(broker, lambda rec: rec), 30))
    assert [(e.job_id, e.decision_id) for e in broker.sent if e.kind == "place"] == [("j1", mine.decision_id)]


def test_another_owners_decision_of_the_same_id_on_another_node_is_not_taken_for_this_workers_own() -> None:
    """Decision ids are the same on any owner: the old owner's late decision of the attempt (on n9) read while
    this worker's own (on n1) waits for the broker is applied first, and holds the job; the step's is stale
    and sends nothing. Taken for this worker's own by its id alone, it got no command (found by review)."""
    broker = SlowBroker()

    def theirs(mine: DecisionRecord) -> DecisionRecord:
        return mine.model_copy(update={"node_id": "n9", "gpu_indices": [], "event_time": datetime.now(UTC)})

    w, mine = asyncio.run(asyncio.wait_for(read_back_while_the_step_waits(broker, theirs), 30))
    assert [(e.decision_id, e.node_id) for e in broker.sent if e.kind == "place"] == [(mine.decision_id, "n9")]
    assert w.running["j1"]["node_id"] == "n9"


def test_no_command_again_close_to_the_confirmation_timeout() -> None:
    """The ``timed_out`` may re-queue the job before the agent's ``started`` comes: its retry would run beside
    the late start. Such a reservation is left to the timeout (found by review)."""
    sent = Sent()

    async def go() -> None:
        w, loop = on_a_stood_in_worker(sent)
        w.nodes.data["n1"] = c1_node("n1", num_gpu=4)
        timeout = w.settings.confirm_timeout_s
        for job_id, age in (("old", timeout - RESEND_MARGIN_S + 1), ("young", timeout - RESEND_MARGIN_S - 1)):
            rec = placed(job_id).model_copy(update={"event_time": datetime.fromtimestamp(time.time() - age, UTC)})
            pending = on_submitted(job(job_id), None, 0.0)
            w.apply(pending, partition=C1)
            w.apply(on_decision(rec, pending.pending[job_id]), partition=C1)
        await loop.tick()
        assert [c[0] for c in commands(sent)] == ["young"]

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_gang_member_is_commanded_only_with_its_gang_placed_whole() -> None:
    """A step placed both members of a gang; one decision went through, and the worker died before it
    moved that member back to the queue: sent alone, it ran without its gang, which waited for it
    (found by review). It is left to the timeout, unless the whole gang is placed."""
    sent = Sent()

    async def go() -> None:
        w, loop = on_a_stood_in_worker(sent)  # no node known here: this worker places nothing itself
        members = {m: on_submitted(job(m, gang_id="g", gang_size=2), None, 0.0) for m in ("a", "b")}
        for t in members.values():
            w.apply(t, partition=C1)
        w.apply(on_decision(decided_now("a"), members["a"].pending["a"]), partition=C1)  # b still pending
        await loop.tick()
        assert commands(sent) == []
        # b's decision read from the topic a tick later (found by the review of the change: a, dropped at the
        # first look, never got its command, and b ran alone)
        rec = decided_now("b")
        t = on_decision(rec, members["b"].pending["b"])
        w.apply(t, partition=C1)
        loop.uncommanded.note_applied(rec, t, own=False)  # (as the decisions agent does)
        await loop.tick()
        assert sorted(c[0] for c in commands(sent)) == ["a", "b"]

    asyncio.run(asyncio.wait_for(go(), 30))


def test_no_command_again_for_a_placement_moved_off_a_lost_node() -> None:
    """The lost-node check fences the placement and reports it preempted; until that report comes back the
    job is still reserved: its command went out again right after its fence (found by review)."""
    sent = Sent()

    async def go() -> None:
        w, _ = stood_in_worker(sent.publish, policy="best-fit", node_lost_s=0)
        loop = w.loop  # type: ignore[attr-defined]
        w.nodes.data["n1"] = c1_node("n1", num_gpu=4) | {"healthy": False}
        rec = decided_now("j1")
        pending = on_submitted(job("j1"), None, 0.0)
        w.apply(pending, partition=C1)
        w.apply(on_decision(rec, pending.pending["j1"]), partition=C1)
        await loop.tick()
        actions = [decode("actions", a["value"]) for a in sent.by_topic.get("actions", [])]
        assert [(a.kind, a.node_id) for a in actions] == [("preempt", "n1")]

    asyncio.run(asyncio.wait_for(go(), 30))


def test_an_inherited_reservation_is_given_the_whole_timeout_from_when_its_partition_came() -> None:
    """A worker that took a partition over (a restart, a rebalance) counts the confirmation timeout of the
    reservations it found there from then (``Worker.confirm_clock``): after a restart it had rarely more than
    a few seconds to send their commands again, and they timed out as before (found by review)."""
    sent = Sent()

    async def go() -> None:
        w, loop = on_a_stood_in_worker(sent)
        w.nodes.data["n1"] = c1_node("n1", num_gpu=4)
        old = time.time() - w.settings.confirm_timeout_s - 60  # decided a minute past its timeout
        rec = placed("j1").model_copy(update={"event_time": datetime.fromtimestamp(old, UTC)})
        pending = on_submitted(job("j1"), None, 0.0)
        w.apply(pending, partition=C1)
        w.apply(on_decision(rec, pending.pending["j1"]), partition=C1)
        await loop._on_partitions_assigned(w.app)  # the partition is this worker's from now
        await loop.tick()
        assert [c[0] for c in commands(sent)] == ["j1"] and not sent.lifecycle()  # sent again, not timed out

    asyncio.run(asyncio.wait_for(go(), 30))
