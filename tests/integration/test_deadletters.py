"""Malformed events reach the dead-letter topic with their original bytes and a reason;
the worker keeps going and places the valid job that follows them."""

from __future__ import annotations

import asyncio
import json

import pytest

from scheduling.events import JobSubmitted, NodeTelemetry
from streams.producer import EventProducer
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS

pytestmark = pytest.mark.integration

VALID = JobSubmitted(job_id="ok-1", cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=500,
                     trace_duration_s=1).model_dump(mode="json")  # fmt: skip


def _with(**kw: object) -> bytes:
    d = {**VALID, "event_id": f"e-{len(kw)}-{next(iter(kw))}", **kw}
    return json.dumps(d).encode()


def _without(field: str) -> bytes:
    d = {k: v for k, v in VALID.items() if k != field}
    d["event_id"] = f"e-missing-{field}"
    return json.dumps(d).encode()


# (payload, words the dead letter's reason must contain)
MALFORMED: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "not-json": (b"{this is not json", ("Invalid JSON",)),
    "not-utf8": (b"\xff\xfe\x00garbage", ("Invalid JSON",)),
    "missing-job-id": (_without("job_id"), ("job_id", "Field required")),
    "wrong-type": (_with(job_id="wt", cpu_milli="lots"), ("cpu_milli",)),
    "negative-cpu": (_with(job_id="neg", cpu_milli=-5), ("cpu_milli", "greater than or equal")),
    "absurd-memory": (_with(job_id="abs", memory_mib=10**12), ("memory_mib", "less than or equal")),
    "unknown-gpu-model": (_with(job_id="gm", gpu_models=["TPU-v9"]), ("unknown GPU model", "TPU-v9")),
    "oversized": (_with(job_id="big", command="x" * 400_000), ("exceeds", "limit")),
    "fractional-multi-gpu": (_with(job_id="fm", num_gpu=2, gpu_milli=300), ("fractional",)),
}


def test_malformed_events_are_dead_lettered_and_the_worker_keeps_going(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info")
    p.start_agents(*FAST_AGENTS)

    async def publish() -> None:
        async with EventProducer(p.settings) as prod:
            await prod.send("nodes.telemetry", NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000,
                                                             memory_mib=16384, num_gpu=1, gpu_model="T4"))  # fmt: skip
            for name, (raw, _) in MALFORMED.items():
                await prod.send_raw("jobs.submitted", raw, key=name.encode(), cluster="default")
            await prod.send_raw("nodes.telemetry", b'{"node_id": "n2", "cpu_milli": -1}', key=b"n2",
                                cluster="default")  # fmt: skip
            await prod.send("jobs.submitted", JobSubmitted.model_validate(VALID))
            await prod.flush()

    asyncio.run(publish())
    st = p.wait(lambda s: s["finished"] == 1, timeout=90, what="the valid job to finish")
    assert st["counters"]["deadletters"] == len(MALFORMED) + 1
    assert st["counters"]["accepted"] == 1
    assert p.children["worker"].alive()

    # the archiver is a consumer of its own (its fetches may be held at the broker for a moment)
    p.wait_scalar("SELECT count() FROM deadletter FINAL", len(MALFORMED) + 1, 60)
    rows = p.sql("SELECT message_key, reason, hex(original), original_size, topic FROM deadletter FINAL")
    by_key = {r[0]: r for r in rows}
    assert set(by_key) == {*MALFORMED, "n2"}
    for name, (raw, words) in MALFORMED.items():
        key, reason, original, size, topic = by_key[name]
        assert topic == "jobs.submitted"
        assert size == len(raw)
        for word in words:
            assert word in reason, (name, reason)
        if len(raw) < 64 * 1024:  # small originals are kept whole
            assert bytes.fromhex(original) == raw, name
    assert "cpu_milli" in by_key["n2"][1] and by_key["n2"][4] == "nodes.telemetry"
    # and nothing malformed reached the job tables
    assert p.scalar("SELECT count() FROM jobs_submitted FINAL") == 1


def test_a_submission_without_event_id_has_one_id_in_the_worker_and_the_archive(make_stack) -> None:  # type: ignore[no-untyped-def]
    """The worker and the archiver each drew their own uuid for it: the dead letter of a second
    copy named an event the archive did not hold."""
    import re

    p = make_stack()
    asyncio.run(ensure_topics(p.settings))
    p.start_worker()
    bare = b'{"kind": "job_submitted", "job_id": "no-id", "cpu_milli": 1000}'

    async def publish() -> None:
        async with EventProducer(p.settings) as prod:
            for _ in range(2):  # the same bytes twice: the second is the same job id again
                await prod.send_raw("jobs.submitted", bare, key=b"no-id", cluster="default")
            await prod.flush()

    asyncio.run(publish())
    p.wait(lambda s: s["counters"]["deadletters"] == 1, timeout=60, what="the second copy dead-lettered")
    assert p.wait_scalar("SELECT count() FROM jobs_submitted FINAL WHERE job_id = 'no-id'", 2, timeout=60) == 2
    assert p.wait_scalar("SELECT count() FROM deadletter FINAL WHERE message_key = 'no-id'", 1, timeout=60) == 1
    reason = p.sql("SELECT reason FROM deadletter FINAL WHERE message_key = 'no-id'")[0][0]
    (cited,) = re.findall(r"already submitted \(event (\w+)\)", reason)
    archived = p.sql("SELECT event_id FROM jobs_submitted FINAL WHERE job_id = 'no-id'")
    assert [cited] in archived and len(archived) == 2  # the first copy's id; the second has its own
