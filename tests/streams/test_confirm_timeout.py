"""A placement no agent confirms with ``started`` within ``confirm_timeout_s`` is announced
``timed_out`` once, and the job is decided again (streams/loop.py ``_check_timeouts``): on the real
worker loop with the broker stood in. Untested before (found by the test review: a loop that
never timed out passed every test)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from scheduling.events import JobSubmitted, NodeTelemetry, decode, partition_for
from streams.agents import apply_lifecycle
from streams.state import on_submitted
from tests.streams.loop_helpers import delivered, stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)
PART = partition_for("c1", 4)


def test_an_unconfirmed_placement_times_out_once_and_the_job_is_decided_again() -> None:
    sent: list[Any] = []

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        sent.append(decode(topic, value))
        return await delivered(topic, key, value, partition, headers)

    async def passes(loop: Any, n: int = 1) -> None:
        for _ in range(n):
            loop._timeouts_checked = -1e9  # (a pass over the running table at most every min(1 s, timeout / 4))
            await loop.tick()

    async def go() -> tuple[list[Any], list[Any], dict]:
        w, _ = stood_in_worker(publish, policy="best-fit", confirm_timeout_s=30.0)
        loop = w.loop  # type: ignore[attr-defined]
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000,
                                           memory_mib=16384).model_dump(mode="json")  # fmt: skip
        job = JobSubmitted(job_id="j1", event_id="ev-j1", event_time=T0, cluster="c1", cpu_milli=1000, memory_mib=1024)
        w.apply(on_submitted(job, None, 0.0), partition=PART)
        await passes(loop)
        assert w.running["j1"]["state"] == "reserved"
        await passes(loop)  # within the timeout: nothing
        assert not [e for e in sent if e.kind == "job_lifecycle"]
        w.running.data["j1"] = w.running["j1"] | {"reserved_ts": w.running["j1"]["reserved_ts"] - 31.0}
        await passes(loop, 2)  # past it: announced once, not at every pass
        notices = [e for e in sent if e.kind == "job_lifecycle"]
        for ev in notices:  # the notice comes back from the topic: the job is queued again
            await apply_lifecycle(w, ev, PART)
        await passes(loop)
        return notices, [e for e in sent if e.kind == "decision" and e.outcome == "placed"], dict(w.running["j1"])

    notices, placed, running = asyncio.run(go())
    [ev] = notices
    assert (ev.job_id, ev.state, ev.attempt, ev.node_id) == ("j1", "timed_out", 0, "n1")
    assert ev.reason == "placement not confirmed by 'started' within 30s"
    assert [(d.job_id, d.attempt) for d in placed] == [("j1", 0), ("j1", 1)]
    assert running["state"] == "reserved" and running["attempt"] == 1
