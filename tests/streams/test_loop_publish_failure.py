"""A step some of whose decisions fail (streams/loop.py ``_step_cluster``, streams/step_publication.py),
on the real worker app and loop with the broker stood in:

- the producer refuses the second decision of a step as it is handed over (aiokafka raises at
  ``send`` when, say, the topic's metadata does not come in time). No job may stay hidden (found by
  review: the job whose hand-over failed stayed in ``inflight`` for good, out of the queue, holding
  its GPU);
- the broker refuses the delivery of one decision of three. The two it acknowledged must go the
  whole way, applied and their commands sent (found by review: they were neither, so their jobs,
  reserved when the decisions came back from the topic, waited for the confirmation timeout).

Either way the next step places the rest, and every job is placed once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError

from scheduling.events import JobSubmitted, NodeTelemetry, decode, partition_for
from streams.state import on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def job(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip


class Broker:
    """The broker stood in: it records the decisions and commands it takes, and refuses the step's
    second decision once, at its hand-over (the producer raises) or at its delivery (the future fails)."""

    def __init__(self, refuse: str) -> None:
        self.decisions: list[Any] = []
        self.commands: list[Any] = []
        self.refuse = refuse  # "hand-over" | "delivery", until it has refused once

    async def publish(self, topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("decisions"):
            if len(self.decisions) == 1 and self.refuse == "hand-over":
                self.refuse = ""
                raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
            self.decisions.append(decode("decisions", value))
            if len(self.decisions) == 2 and self.refuse == "delivery":
                self.refuse = ""
                failed = asyncio.get_running_loop().create_future()
                failed.set_exception(KafkaTimeoutError("request timed out"))
                return failed
        elif topic.endswith("actions"):
            self.commands.append(decode("actions", value))
        return await delivered(topic, key, value, partition, headers)


def test_a_decision_the_producer_refuses_leaves_no_job_hidden_and_the_next_step_places_the_rest_once() -> None:
    broker = Broker("hand-over")
    decisions, commands = broker.decisions, broker.commands

    async def run() -> None:
        w, _ = stood_in_worker(broker.publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, ["j1", "j2"])
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        assert w.inflight == {}  # no job hidden from the queue, nor holding a GPU
        assert list(w.pending) == ["j2"] and list(w.running) == ["j1"]  # j1's decision was delivered
        assert [c.job_id for c in commands] == ["j1"]  # and its command sent
        await loop.tick()
        placed = [d for d in decisions if d.outcome == "placed"]
        assert [d.job_id for d in placed] == ["j1", "j2"]  # the second step decided j2, once
        assert [c.job_id for c in commands] == ["j1", "j2"]
        gpus = {k: (v["node_id"], tuple(v["gpu_indices"])) for k, v in w.running.items()}
        assert sorted(gpus) == ["j1", "j2"] and len(set(gpus.values())) == 2, gpus
        assert not list(w.pending) and w.inflight == {}

    asyncio.run(run())


def test_the_decisions_the_broker_acknowledged_are_applied_and_commanded_when_another_is_refused() -> None:
    broker = Broker("delivery")
    decisions, commands = broker.decisions, broker.commands

    async def run() -> None:
        w, _ = stood_in_worker(broker.publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, ["j1", "j2", "j3"], gpus=4)
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        refused = decisions[1].job_id
        acked = sorted({"j1", "j2", "j3"} - {refused})
        assert sorted(w.running) == acked and list(w.pending) == [refused] and w.inflight == {}
        assert sorted(c.job_id for c in commands) == acked  # each acknowledged placement was sent to its agent
        await loop.tick()
        assert [d.job_id for d in decisions[3:] if d.outcome == "placed"] == [refused]  # decided again, alone
        assert decisions[3].decision_id == decisions[1].decision_id  # under the same id
        assert sorted(c.job_id for c in commands) == ["j1", "j2", "j3"]  # one command each
        gpus = {k: (v["node_id"], tuple(v["gpu_indices"])) for k, v in w.running.items()}
        assert len(set(gpus.values())) == 3 and not list(w.pending) and w.inflight == {}

    asyncio.run(run())


def test_a_decision_that_fails_to_apply_leaves_the_others_applied_and_commanded() -> None:
    """(Found by review: the first failure to apply an acknowledged decision left the rest unapplied and
    without commands, each job waiting for its confirmation timeout and charged a retry.)"""
    broker = Broker("")

    async def run() -> None:
        w, _ = stood_in_worker(broker.publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, ["j1", "j2", "j3"], gpus=4)
        real, failing = w.apply_decision, {"j1"}

        async def apply_decision(rec: Any, *args: Any, **kwargs: Any) -> Any:
            if rec.job_id in failing:
                failing.discard(rec.job_id)
                raise RuntimeError("the table's changelog send failed")
            return await real(rec, *args, **kwargs)

        w.apply_decision = apply_decision
        with pytest.raises(RuntimeError, match="changelog"):
            await loop.tick()
        assert sorted(w.running) == ["j2", "j3"] and sorted(c.job_id for c in broker.commands) == ["j2", "j3"]

    asyncio.run(run())


def add_node_and_jobs(w: Any, names: list[str], gpus: int = 2) -> None:
    part = partition_for("c1", 4)
    w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000, memory_mib=16384,
                                       num_gpu=gpus, gpu_model="A100").model_dump(mode="json")  # fmt: skip
    for name in names:
        w.apply(on_submitted(job(name), None, 0.0), partition=part)


@pytest.mark.parametrize("refused_at", ["hand-over", "delivery"])
def test_a_waiting_record_the_producer_or_broker_refused_is_said_again_at_the_next_step(refused_at: str) -> None:
    """Why a job waits is recorded once per reason (for explain). Found by review: one the producer
    refused at hand-over was never said (its reason was noted as said before the send)."""
    waiting: list[Any] = []
    refuse = {"left": 1}

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        rec = decode("decisions", value) if topic.endswith("decisions") else None
        if rec is not None and rec.outcome == "unschedulable":
            waiting.append(rec)
            if refuse["left"]:
                refuse["left"] -= 1
                if refused_at == "hand-over":
                    raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
                failed = asyncio.get_running_loop().create_future()
                failed.set_exception(KafkaTimeoutError("request timed out"))
                return failed
        return await delivered(topic, key, value, partition, headers)

    async def run() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, ["j1", "j2", "j3"], gpus=2)  # one GPU each: j3 waits
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        await loop.tick()
        await loop.tick()
        assert [r.job_id for r in waiting] == ["j3", "j3"]  # said again once, then not repeated

    asyncio.run(run())


def refusing_the_first_command(commands: list[Any]) -> Any:
    """A broker stood in whose producer refuses the first placement command handed over (and keeps the
    ones it takes in ``commands``)."""
    refuse = {"left": 1}

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("actions"):
            if refuse["left"]:
                refuse["left"] -= 1
                raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
            commands.append(decode("actions", value))
        return await delivered(topic, key, value, partition, headers)

    return publish


def test_a_refused_command_is_sent_again_and_the_others_of_its_step_still_go() -> None:
    """Found by review: the step handed its commands over one after another; the first refused ended it,
    the later ones were never handed over, and nothing sent any of them again: each job waited for the
    confirmation timeout, charged a failure."""
    commands: list[Any] = []
    publish = refusing_the_first_command(commands)

    async def run() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, ["j1", "j2", "j3"], gpus=4)
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        assert sorted(w.running) == ["j1", "j2", "j3"]  # all three decisions went through
        assert len(commands) == 2 and len(w.unsent_commands) == 1  # the refused one is kept
        [(job_id, *_)] = w.unsent_commands.values()
        await loop.tick()
        assert sorted(c.job_id for c in commands) == ["j1", "j2", "j3"] and not w.unsent_commands
        assert sorted(w.running) == ["j1", "j2", "j3"]  # each placed once
        assert [c.job_id for c in commands].count(job_id) == 1

    asyncio.run(run())


def test_a_gang_one_of_whose_decisions_is_refused_runs_no_member_and_is_placed_again_whole() -> None:
    """Found by review: the members whose decisions went through ran, and the one refused went back to the
    queue alone, to wait until they had finished."""
    from streams.agents import apply_lifecycle

    published: list[tuple[str, Any]] = []
    refuse = {"left": 1}

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        kind = topic  # (the logical name: the worker stood in maps none)
        ev = decode(kind, value)
        published.append((kind, ev))
        if kind == "decisions" and ev.job_id == "g2" and refuse["left"]:
            refuse["left"] -= 1
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(KafkaTimeoutError("request timed out"))
            return failed
        return await delivered(topic, key, value, partition, headers)

    def member(job_id: str) -> JobSubmitted:
        return job(job_id).model_copy(update={"gang_id": "g", "gang_size": 2})

    async def run() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, [], gpus=4)
        part = partition_for("c1", 4)
        for name in ("g1", "g2"):
            w.apply(on_submitted(member(name), None, 0.0), partition=part)
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        assert [ev for kind, ev in published if kind == "actions"] == []  # g1 did not start without g2
        [back] = [ev for kind, ev in published if kind == "jobs.lifecycle"]
        assert (back.job_id, back.state) == ("g1", "preempted") and "g2" in back.reason
        await apply_lifecycle(w, back, part)  # the lifecycle agent applies it
        assert sorted(w.pending) == ["g1", "g2"] and not list(w.running)
        await loop.tick()
        started = [ev.job_id for kind, ev in published if kind == "actions"]
        assert sorted(started) == ["g1", "g2"] and sorted(w.running) == ["g1", "g2"]  # together, once each

    asyncio.run(run())


def test_a_refused_command_is_not_sent_again_by_a_worker_that_no_longer_owns_its_partition() -> None:
    """Found by the diff review: the tables keep keys of partitions that moved to another worker, and the
    re-send did not look: the old owner sent a command on a partition it no longer decides."""
    commands: list[Any] = []
    publish = refusing_the_first_command(commands)

    async def run() -> None:
        from streams.step_publication import resend_commands

        w, _ = stood_in_worker(publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        add_node_and_jobs(w, ["j1"], gpus=4)
        with pytest.raises(KafkaTimeoutError):
            await loop.tick()
        assert len(w.unsent_commands) == 1 and commands == []
        assert await resend_commands(w, owned=set(), given_up=set()) == 0  # the partition went elsewhere
        assert not w.unsent_commands and commands == []

    asyncio.run(run())
