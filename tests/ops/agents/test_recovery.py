"""ops/agents/recovery.py against the real broker: what a (re)started agents process reads back."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from ops.agents.recovery import recover
from scheduling.events import JobLifecycle, NodeTelemetry
from streams.producer import EventProducer
from streams.settings import Settings


def test_agents_that_start_before_the_topics_exist_create_them_and_read_back_what_is_there(
        kafka_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    s = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"rec{uuid.uuid4().hex[:8]}.", partitions=2,
                 state_dir=tmp_path)  # fmt: skip
    first = asyncio.run(recover(s))  # no topic yet: created, nothing to read back
    assert not first.inventory and not first.reported and not first.lost

    async def publish() -> None:
        async with EventProducer(s) as p:
            for node in ("n1", "n2"):
                await p.send("nodes.telemetry", NodeTelemetry(node_id=node, source="inventory", cpu_milli=4000,
                                                              memory_mib=8192))  # fmt: skip
            await p.send("nodes.telemetry", NodeTelemetry(node_id="n1", source="agent", cpu_milli=4000, memory_mib=8192))
            for job, states in (("done", ["started", "finished"]), ("lost", ["started"]), ("refused", ["failed"])):
                for state in states:
                    await p.send("jobs.lifecycle", JobLifecycle(job_id=job, state=state, decision_id=f"d-{job}",
                                                                node_id="n1"))  # fmt: skip
            await p.flush()

    asyncio.run(publish())
    got = asyncio.run(recover(s))
    assert set(got.inventory) == {"n1", "n2"} and got.inventory["n1"].source == "inventory"
    assert got.reported == {"d-done", "d-lost", "d-refused"}
    assert [ev.job_id for ev in got.lost] == ["lost"]
