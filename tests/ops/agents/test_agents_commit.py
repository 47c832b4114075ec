"""The simulated agents commit a command's offset only once it is executed and its report delivered
(ops/agents/simulated.py ``_commit``), against the real broker.

Found by review: the consumer auto-committed what ``getmany`` returned, so agents that stopped on an
error mid-batch (here the producer's ``DeliveryError``, which it raises on any send after a failed
delivery) committed the whole batch, and their successor never executed or reported the rest: 18 of 20
placements sat reserved until the confirmation timeout charged their jobs a retry."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from ops.agents.simulated import SimulatedAgents
from scheduling.events import NodeTelemetry, PlacementCommand, decision_id_for, decode
from streams.producer import DeliveryError, EventProducer
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.conftest_kafka import read_topic

COMMANDS = 20


def command(i: int) -> PlacementCommand:
    return PlacementCommand(decision_id=decision_id_for(f"j{i}", 0, "sub"), job_id=f"j{i}", node_id="n1", cpu_milli=100,
                            memory_mib=10, policy="best-fit", trace_duration_s=3600.0)  # fmt: skip


def test_agents_that_stop_on_an_error_mid_batch_leave_the_rest_of_it_to_their_successor(
        kafka_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    s = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"com{uuid.uuid4().hex[:8]}.", partitions=2,
                 state_dir=tmp_path)  # fmt: skip

    async def go() -> SimulatedAgents:
        await ensure_topics(s)
        async with EventProducer(s) as p:
            await p.send("nodes.telemetry", NodeTelemetry(node_id="n1", source="inventory", cpu_milli=1_000_000,
                                                          memory_mib=1_000_000))  # fmt: skip
            for i in range(COMMANDS):
                await p.send("actions", command(i))
            await p.flush()
        first = SimulatedAgents(s, default_duration_s=3600.0, predecessor_wait_s=20)
        report, sent = first._lifecycle, [0]

        async def third_report_fails(cmd: PlacementCommand, state: str, **kw: Any) -> None:
            sent[0] += 1
            if sent[0] == 3:
                raise DeliveryError(1, s.topic("jobs.lifecycle"), "KafkaTimeoutError (stood in)")
            await report(cmd, state, **kw)

        first._lifecycle = third_report_fails  # type: ignore[method-assign]
        with pytest.raises(DeliveryError):
            await first.run()
        second = SimulatedAgents(s, default_duration_s=3600.0, predecessor_wait_s=20)
        task = asyncio.create_task(second.run())
        for _ in range(300):
            if second.stats.started >= COMMANDS - 2:
                break
            await asyncio.sleep(0.1)
        second.stop()
        await task
        return second

    second = asyncio.run(go())
    lifecycle = [decode("jobs.lifecycle", m.value) for m in read_topic(s.bootstrap, s.topic("jobs.lifecycle"), s.partitions)]
    started = sorted({ev.job_id for ev in lifecycle if ev.state == "started"})
    assert started == sorted(f"j{i}" for i in range(COMMANDS)), "a command was neither executed nor reported"
    # the two the first process reported (and ran: their runs are lost with it) are not executed again
    assert second.stats.started == COMMANDS - 2 and second.stats.lost_on_restart == 2
    assert len([ev for ev in lifecycle if ev.state == "started"]) == COMMANDS
