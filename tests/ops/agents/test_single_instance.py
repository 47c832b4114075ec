"""ops/agents/single_instance.py against the real broker: a second agents process refuses to
start while one consumes, instead of reporting the live one's runs lost."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiokafka import AIOKafkaConsumer

from ops.agents import single_instance
from ops.agents.simulated import SimulatedAgents
from ops.agents.single_instance import AgentsAlreadyRunning, agents_group, wait_until_alone
from scheduling.events import JobLifecycle
from streams.producer import EventProducer
from streams.settings import Settings
from streams.topics import ensure_topics


def test_a_second_agents_process_refuses_while_one_consumes_and_starts_once_it_left(
        kafka_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    s = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"one{uuid.uuid4().hex[:8]}.", partitions=2,
                 state_dir=tmp_path)  # fmt: skip

    async def scenario() -> None:
        await ensure_topics(s)
        async with EventProducer(s) as p:  # a run the live agents process has started
            await p.send("jobs.lifecycle", JobLifecycle(job_id="j", state="started", decision_id="d-j", node_id="n1"))
            await p.flush()
        await wait_until_alone(s, wait_s=0)  # nobody yet
        live = AIOKafkaConsumer(s.topic("actions"), bootstrap_servers=s.bootstrap, group_id=agents_group(s))
        await live.start()
        try:
            await live.getmany(timeout_ms=3000)  # joined: a member of the group
            t0 = time.monotonic()
            with pytest.raises(AgentsAlreadyRunning, match="another `semsched agents` is running"):
                await wait_until_alone(s, wait_s=2, poll_s=0.5)
            assert time.monotonic() - t0 >= 2  # it waited for a predecessor's session to expire first
            second = SimulatedAgents(s, predecessor_wait_s=1)
            with pytest.raises(AgentsAlreadyRunning):
                await asyncio.wait_for(second.run(), timeout=30)
            assert second.stats.lost_on_restart == 0  # the live one's run was not reported lost
        finally:
            await live.stop()  # leaves the group
        await asyncio.wait_for(wait_until_alone(s, wait_s=10, poll_s=0.5), timeout=30)

    asyncio.run(scenario())



def test_a_group_the_coordinator_is_still_loading_is_not_taken_for_an_empty_one(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A restarted broker's coordinator answers a group it is still loading with an error code and no
    members (GROUP_LOAD_IN_PROGRESS, 14): that is no answer, not "no other agents process" (found by
    review). Until the fix the first such answer let a second agents process start beside the live one."""
    codes = iter([14, 14])  # loading twice, then the live member shows (a broker answer not forced on the real one)

    class Admin:
        def __init__(self, **_: object) -> None: ...
        async def start(self) -> None: ...
        async def close(self) -> None: ...

        async def describe_consumer_groups(self, groups: list[str]) -> list[SimpleNamespace]:
            code = next(codes, 0)
            group = {"error_code": code, "group": groups[0], "members": [] if code else [{"client_host": "/10.0.0.7"}]}
            return [SimpleNamespace(to_object=lambda: {"groups": [group]})]

    monkeypatch.setattr(single_instance, "AIOKafkaAdminClient", Admin)
    s = Settings(bootstrap="localhost:1", topic_prefix="load.", partitions=2, state_dir=tmp_path)
    with pytest.raises(AgentsAlreadyRunning, match="10.0.0.7"):
        asyncio.run(wait_until_alone(s, wait_s=0.3, poll_s=0.01))
