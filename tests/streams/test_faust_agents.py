"""The worker's Faust agents (``streams/app.py``) in Faust's broker-free test mode.

``agent.test_context()`` cannot drive these agents as they are: the agents never yield, and
the test wrapper attaches a sink (to know when a value was processed), which Faust refuses
with ``ImproperlyConfigured("Agent must yield to use sinks")``. :func:`drive` therefore runs
the agent's own function unchanged inside a small generator that yields once per event the
agent has finished with (when it asks the stream for the next one), so ``put()`` returns
after the event was handled. Table writes happen inside the real stream iteration.

Every ``send`` on the worker's topics is replaced by a recorder: nothing talks to Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import types
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from faust.types import TP

from scheduling.events import (
    MAX_MEMORY_MIB,
    DeadLetter,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decision_id_for,
    decode,
    partition_for,
)
from streams.app import Worker, create_app
from streams.settings import Settings

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _yielding(consume: Callable[[Any], Any]) -> Callable[[Any], AsyncIterator[None]]:
    async def gen(stream: Any) -> AsyncIterator[None]:
        processed: asyncio.Queue[None] = asyncio.Queue()

        class Tap:
            def __getattr__(self, name: str) -> Any:
                return getattr(stream, name)

            async def events(self) -> AsyncIterator[Any]:
                async for event in stream.events():
                    yield event
                    processed.put_nowait(None)  # the agent came back for the next one

        task = asyncio.ensure_future(consume(Tap()))
        try:
            while True:
                getter = asyncio.ensure_future(processed.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    getter.cancel()
                    task.result()  # the agent crashed: surface it
                    return
                yield None
        finally:
            task.cancel()

    return gen


class Sent:
    """What the worker tried to publish, per un-prefixed topic."""

    def __init__(self) -> None:
        self.by_topic: dict[str, list[dict[str, Any]]] = {}
        self.refuse: str | None = None  # a topic whose deliveries the broker refuses
        self.refusals: int | None = None  # how many times it refuses (None: every time)
        self.seeks: list[tuple[str, int, int]] = []  # (topic, partition, offset) the worker sought back to

    async def seek(self, tp: Any, offset: int) -> None:
        """Stands in for the Faust consumer's ``seek`` (nothing to fetch again in test mode)."""
        self.seeks.append((tp.topic, tp.partition, offset))

    starts: dict[tuple[str, int], int] = {}  # noqa: RUF012  (per test: set on the instance)

    async def of(self, tp: Any, assigned: Any) -> int | None:
        """Stands in for ``OffsetStarts.of`` (no group to ask in test mode)."""
        return self.starts.get((tp.topic, tp.partition))

    def forget(self, tps: Any) -> None:
        pass

    async def publish(self, topic: str, key: bytes | None, value: bytes, partition: int,
                      headers: Any = None) -> asyncio.Future[None]:  # fmt: skip
        """Stands in for ``Worker.publish`` (no broker in Faust's test mode): records the message
        and returns its delivery future, failed when ``topic`` is ``refuse``."""
        delivered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if topic == self.refuse and self.refusals != 0:
            self.refusals = None if self.refusals is None else self.refusals - 1
            delivered.set_exception(RuntimeError(f"MessageSizeTooLargeError on {topic}"))
        else:
            self.by_topic.setdefault(topic, []).append({"key": key, "value": value, "partition": partition,
                                                        "headers": headers})  # fmt: skip
            delivered.set_result(None)
        return delivered

    def deadletters(self) -> list[DeadLetter]:
        return [decode("deadletter", s["value"]) for s in self.by_topic.get("deadletter", [])]  # type: ignore[misc]

    def lifecycle(self) -> list[JobLifecycle]:
        return [decode("jobs.lifecycle", s["value"]) for s in self.by_topic.get("jobs.lifecycle", [])]  # type: ignore[misc]


@pytest.fixture
async def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Worker, Sent]:
    s = Settings(bootstrap="127.0.0.1:1", topic_prefix=f"u{uuid.uuid4().hex[:8]}.", web_port=0,
                 state_dir=tmp_path, max_retries=3)  # fmt: skip
    w = create_app(s)
    sent = Sent()
    monkeypatch.setattr(w, "publish", sent.publish)
    monkeypatch.setattr(w.app.consumer, "seek", sent.seek)
    monkeypatch.setattr(w, "offset_starts", sent)  # where consumption starts: the first event, unless a test says
    return w, sent


@asynccontextmanager
async def drive(w: Worker, topic: str) -> AsyncIterator[Any]:
    agent = w.app.agents[f"ingest-{topic.replace('.', '-')}"]
    async with agent.test_context(fun=_yielding(agent.fun)) as a:
        yield a


async def put(a: Any, value: bytes | None, key: bytes | None = None, *, offset: int | None = None, **kw: Any) -> None:
    """Deliver ``value`` to the agent on its cluster's partition (as a real producer must),
    unless the test names another, at the partition's next offset (a real topic's offsets are
    contiguous per partition), unless the test names one."""
    if "partition" not in kw and value is not None:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            kw["partition"] = partition_for(json.loads(value)["cluster"], 4)
    nxt = a.__dict__.setdefault("next_offsets", {})
    part = kw.get("partition") or 0
    a.sent_offset = nxt.get(part, 0) if offset is None else offset
    nxt[part] = a.sent_offset + 1
    await asyncio.wait_for(a.put(value, key=key, **kw), timeout=10)


def snapshot(w: Worker) -> dict[str, dict[str, Any]]:
    return {name: dict(getattr(w, name).items()) for name in ("pending", "running", "done", "nodes")}


def job(job_id: str = "j1", **kw: Any) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, cpu_milli=2000, memory_mib=1024,
                        **{"event_id": f"ev-{job_id}", "cluster": "c1", "event_time": T0, **kw})  # fmt: skip


def valid_job_dict(job_id: str = "j9") -> dict[str, Any]:
    return json.loads(job(job_id).to_bytes())


# -- jobs.submitted -------------------------------------------------------------------------


async def test_valid_submission_lands_in_pending(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    ev = job("j1")
    async with drive(w, "jobs.submitted") as a:
        await put(a, ev.to_bytes(), key=b"j1")
    d = w.pending["j1"]
    assert d is not None
    assert JobSubmitted.model_validate(d["job"]) == ev
    assert d["attempt"] == 0 and d["submit_ts"] == T0.timestamp()
    assert "j1" not in w.running and "j1" not in w.done
    assert w.counters.accepted == 1
    assert sent.by_topic == {}


async def test_redelivered_submission_is_accepted_once(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("j1").to_bytes(), key=b"j1")
        await put(a, job("j1").to_bytes(), key=b"j1")
    assert w.counters.accepted == 1
    assert list(w.pending.keys()) == ["j1"]
    assert sent.by_topic == {}


async def test_a_submission_sent_before_its_partitions_forgotten_watermark_is_deadlettered(worker: tuple[Worker, Sent]) -> None:
    """Its job may have been done and forgotten since (streams/done_retention.py): a submission read again
    after a crash or with expired group offsets must not run that job a second time. One sent after the
    watermark is accepted, and one whose Kafka record is stamped far ahead of the worker's clock is refused
    (a producer's clock ahead would put a forgotten job's submission past the watermark)."""
    w, sent = worker
    now = time.time()
    w.forgotten.data[str(partition_for("c1", 4))] = now - 3600
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("old").to_bytes(), key=b"old", timestamp=now - 3700)
        await put(a, job("recent").to_bytes(), key=b"recent", timestamp=now - 3500)
        await put(a, job("ahead").to_bytes(), key=b"ahead", timestamp=now + 3600)
    assert list(w.pending.keys()) == ["recent"]
    old, ahead = sent.deadletters()
    assert "forgotten" in old.reason and "SEMSCHED_DONE_RETENTION" in old.reason, old.reason
    assert "ahead of the worker's clock" in ahead.reason, ahead.reason


async def test_a_report_of_a_job_sent_before_the_forgotten_watermark_is_let_go(worker: tuple[Worker, Sent]) -> None:
    """Not held for its submission (which would be refused), so no fence for a run long over after the wait."""
    w, sent = worker
    now = time.time()
    w.forgotten.data[str(partition_for("c1", 4))] = now - 3600

    def report(job_id: str) -> bytes:
        return JobLifecycle(job_id=job_id, cluster="c1", state="started", attempt=0, decision_id=f"d-{job_id}",
                            node_id="n1").to_bytes()  # fmt: skip

    async with drive(w, "jobs.lifecycle") as a:
        await put(a, report("forgotten"), key=b"forgotten", timestamp=now - 3700)
        await put(a, report("early"), key=b"early", timestamp=now - 10)
    assert w.counters.early_reports == 1 and w.counters.notes.get("report of a forgotten job") == 1
    assert sent.by_topic == {}


async def test_reused_job_id_is_deadlettered(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    first = job("j1")
    other = JobSubmitted(job_id="j1", event_id="ev-other", event_time=T0, cluster="c1", cpu_milli=1)
    async with drive(w, "jobs.submitted") as a:
        await put(a, first.to_bytes(), key=b"j1")
        await put(a, other.to_bytes(), key=b"j1")
    assert JobSubmitted.model_validate(w.pending["j1"]["job"]) == first  # the first one stays
    [dl] = sent.deadletters()
    assert "already submitted" in dl.reason and "ev-j1" in dl.reason
    assert dl.original() == other.to_bytes()


async def test_a_report_without_its_decision_is_deadlettered_with_the_reason(worker: tuple[Worker, Sent]) -> None:
    """What an outside agent that does not echo the command's decision_id sends: refused, said, and the
    job left as it was (before: ignored as stale, the placement timed out and the job was re-placed)."""
    w, sent = worker
    await _submit(w, job("j1"))
    raw = b'{"kind": "job_lifecycle", "job_id": "j1", "cluster": "c1", "state": "started", "node_id": "n1"}'
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, raw, key=b"j1")
    [dl] = sent.deadletters()
    assert "a 'started' report needs the decision_id of the command it is about" in dl.reason
    assert dl.original() == raw and w.pending["j1"] is not None


def _oversized() -> bytes:
    ev = job("big", labels={f"k{i}": "x" * 200 for i in range(2000)})  # a valid event, only too large
    return ev.to_bytes()


MALFORMED = [
    pytest.param(b"{this is not json", "Invalid JSON", id="not-json"),
    pytest.param(b"\xff\xfe\x00garbage", "invalid jobs.submitted event", id="not-utf8"),
    pytest.param(json.dumps({k: v for k, v in valid_job_dict().items() if k != "job_id"}).encode(),
                 "job_id: Field required", id="missing-job-id"),
    pytest.param(json.dumps({**valid_job_dict(), "cpu_milli": "lots"}).encode(),
                 "cpu_milli: Input should be a valid integer", id="wrong-type"),
    pytest.param(json.dumps({**valid_job_dict(), "cpu_milli": -500}).encode(),
                 "cpu_milli: Input should be greater than or equal to 0", id="negative-cpu"),
    pytest.param(json.dumps({**valid_job_dict(), "memory_mib": MAX_MEMORY_MIB * 1000}).encode(),
                 "memory_mib: Input should be less than or equal to", id="absurd-memory"),
    pytest.param(json.dumps({**valid_job_dict(), "num_gpu": 1, "gpu_models": ["H900"]}).encode(),
                 "unknown GPU model(s) ['H900']", id="unknown-gpu-model"),
    pytest.param(json.dumps({**valid_job_dict(), "kind": "node_telemetry"}).encode(),
                 "kind:", id="wrong-kind"),
    pytest.param(_oversized(), "exceeds the 262144-byte limit", id="oversized"),
    pytest.param(None, "empty message (null value)", id="null-value"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "reason"), MALFORMED)
async def test_malformed_submission_is_deadlettered_and_the_agent_goes_on(
    worker: tuple[Worker, Sent], raw: bytes | None, reason: str
) -> None:
    w, sent = worker
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("j0").to_bytes(), key=b"j0")
        before = snapshot(w)
        await put(a, raw, key=b"bad", partition=2)
        assert snapshot(w) == before, "a malformed event must not touch the tables"
        await put(a, job("j2").to_bytes(), key=b"j2")  # the agent keeps processing
    assert set(w.pending.keys()) == {"j0", "j2"}
    assert w.counters.accepted == 2 and w.counters.deadletters == 1
    [s] = sent.by_topic["deadletter"]
    assert s["key"] == b"bad" and s["partition"] == 2
    [dl] = sent.deadletters()
    assert reason in dl.reason, dl.reason
    assert dl.topic == "jobs.submitted" and dl.partition == 2 and dl.offset == 0 and dl.key == "bad"
    raw = raw or b""
    assert dl.original_size == len(raw)
    assert dl.original() == raw[: w.settings.max_message_bytes]  # a larger one is cut at the limit


async def test_a_record_deadlettered_again_is_the_same_dead_letter(worker: tuple[Worker, Sent]) -> None:
    """Read again (a crash or a rebalance before its offset was committed), a malformed record's dead
    letter has the same id and time, so the archive holds it once: the id is derived from where the record
    was read, the time is its Kafka timestamp (before: a new uuid and the time of refusal each time)."""
    w, sent = worker
    sent_at = T0.timestamp() + 0.25
    async with drive(w, "jobs.submitted") as a:
        for _ in range(2):
            await put(a, b"{not json", key=b"bad", partition=1, offset=7, timestamp=sent_at)
        await put(a, b"{not json", key=b"bad", partition=1, offset=8, timestamp=sent_at)
    first, again, other = sent.deadletters()
    assert (first.event_id, first.event_time) == (again.event_id, again.event_time)
    assert first.event_time == datetime.fromtimestamp(sent_at, UTC)
    assert other.event_id != first.event_id  # another record: another dead letter


async def test_a_dead_letter_of_a_huge_key_or_a_long_reason_fits_what_the_producer_takes(
        worker: tuple[Worker, Sent]) -> None:  # fmt: skip
    """A 600 kB key on a 1-byte message fit its topic; its dead letter (the key as Kafka key and in the value)
    did not, and the producer refused it for ever (found by review: the agent retried without end). The
    key and the reason are cut; the original bytes are kept whole. A time no UTC conversion can hold is
    dead-lettered too, and the agent goes on (found by the same review: it stopped the agent)."""
    from scheduling.events import MAX_DEADLETTER_KEY, MAX_TEXT

    w, sent = worker
    async with drive(w, "jobs.submitted") as a:
        await put(a, b"x", key=b"k" * 600_000, partition=2)
        await put(a, b'{"job_id": "t", "event_time": "9999-12-31T23:00:00-23:59"}', key=b"t", partition=2)
        await put(a, job("after").to_bytes(), key=b"after")
    huge, late = sent.by_topic["deadletter"]
    assert len(huge["key"]) == MAX_DEADLETTER_KEY and len(huge["value"]) < 16 * 1024
    first, second = sent.deadletters()
    assert len(first.key) <= MAX_DEADLETTER_KEY and len(first.reason) <= MAX_TEXT and first.original() == b"x"
    assert "cannot be converted to UTC" in second.reason and "after" in w.pending


def test_the_oversized_case_is_otherwise_valid() -> None:
    raw = _oversized()
    assert len(raw) > Settings(bootstrap="x").max_message_bytes
    assert decode("jobs.submitted", raw).job_id == "big"  # so only the size check can reject it


async def test_a_dead_letter_keeps_an_event_of_any_allowed_size_whole(worker: tuple[Worker, Sent]) -> None:
    """A 150 kB event refused for where it was sent, not its size, can be sent again from its dead
    letter: it kept only its first 64 KiB before, which do not decode."""
    w, sent = worker
    raw = job("wide", labels={f"k{i}": "x" * 200 for i in range(700)}).to_bytes()
    assert 64 * 1024 < len(raw) < w.settings.max_message_bytes
    async with drive(w, "jobs.submitted") as a:
        await put(a, raw, key=b"wide", partition=(partition_for("c1", 4) + 1) % 4)
    [dl] = sent.deadletters()
    assert "belong on partition" in dl.reason and dl.original() == raw
    assert decode("jobs.submitted", dl.original()).job_id == "wide"


async def test_message_at_the_size_limit_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = job("edge").to_bytes()
    s = Settings(bootstrap="127.0.0.1:1", topic_prefix=f"u{uuid.uuid4().hex[:8]}.", web_port=0,
                 state_dir=tmp_path, max_message_bytes=len(raw))  # fmt: skip
    w = create_app(s)
    sent = Sent()
    monkeypatch.setattr(w, "publish", sent.publish)
    async with drive(w, "jobs.submitted") as a:
        await put(a, raw, key=b"edge")
        await put(a, job("edge2", name="one byte longer").to_bytes(), key=b"edge2")
    assert "edge" in w.pending and "edge2" not in w.pending
    assert len(sent.by_topic["deadletter"]) == 1 and b"byte limit" in sent.by_topic["deadletter"][0]["value"]


# -- nodes.telemetry ------------------------------------------------------------------------


def telemetry(node_id: str = "n1", at: datetime = T0, **kw: Any) -> NodeTelemetry:
    base = dict(cluster="c1", cpu_milli=64_000, memory_mib=256_000, num_gpu=4, gpu_model="A100")
    return NodeTelemetry(node_id=node_id, event_time=at, **{**base, **kw})


async def test_telemetry_lands_in_nodes(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    ev = telemetry(source="inventory")
    async with drive(w, "nodes.telemetry") as a:
        await put(a, ev.to_bytes(), key=b"n1")
    assert NodeTelemetry.model_validate(w.nodes["n1"]) == ev
    assert w.counters.telemetry == 1
    assert sent.by_topic == {}


async def test_newer_telemetry_replaces_and_late_telemetry_does_not(worker: tuple[Worker, Sent]) -> None:
    w, _ = worker
    old = telemetry(at=T0, cpu_alloc_milli=1000)
    new = telemetry(at=T0 + timedelta(seconds=30), cpu_alloc_milli=2000)
    async with drive(w, "nodes.telemetry") as a:
        await put(a, old.to_bytes(), key=b"n1")
        await put(a, new.to_bytes(), key=b"n1")
        assert w.nodes["n1"]["cpu_alloc_milli"] == 2000
        await put(a, old.to_bytes(), key=b"n1")  # late: must not overwrite
    assert w.nodes["n1"]["cpu_alloc_milli"] == 2000
    assert w.counters.telemetry == 2


async def test_a_late_report_of_its_agent_still_says_the_node_is_heard_from(worker: tuple[Worker, Sent]) -> None:
    """An agent whose clock stepped back (NTP) sends reports older than the node's latest: not applied,
    but the agent is alive, so the node is not taken for silent (found by review: it was marked
    unhealthy after SEMSCHED_NODE_SILENT and its jobs moved off). The latest report redelivered is not."""
    w, _ = worker
    ahead = telemetry(at=T0 + timedelta(seconds=200))
    async with drive(w, "nodes.telemetry") as a:
        await put(a, ahead.to_bytes(), key=b"n1")
        heard = w.node_heard["n1"]
        await put(a, ahead.to_bytes(), key=b"n1")  # redelivered
        assert w.node_heard["n1"] == heard
        time.sleep(0.01)
        await put(a, telemetry(at=T0 + timedelta(seconds=10), cpu_alloc_milli=8000).to_bytes(), key=b"n1")
        assert w.node_heard["n1"] > heard
        heard = w.node_heard["n1"]
        await put(a, telemetry(at=T0 + timedelta(seconds=20), source="inventory").to_bytes(), key=b"n1")
    assert w.node_heard["n1"] == heard  # (an inventory report is not its agent)
    assert w.nodes["n1"]["cpu_alloc_milli"] == 0 and w.counters.telemetry_late == 3


async def test_a_refused_report_of_its_agent_is_remembered_until_one_applies(worker: tuple[Worker, Sent]) -> None:
    """Why the node is not heard from (streams/silent_nodes.py, lost_nodes.py say it)."""
    from datetime import UTC, datetime

    w, sent = worker
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry(at=datetime.now(UTC) + timedelta(days=1)).to_bytes(), key=b"n1")
        assert "ahead of the worker's clock" in w.node_refused["n1"] and len(sent.deadletters()) == 1
        await put(a, telemetry(at=T0).to_bytes(), key=b"n1")
    assert "n1" not in w.node_refused


async def test_newer_telemetry_in_the_same_second_replaces(worker: tuple[Worker, Sent]) -> None:
    w, _ = worker
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry(at=T0, cpu_alloc_milli=1000).to_bytes(), key=b"n1")
        await put(a, telemetry(at=T0 + timedelta(milliseconds=500), cpu_alloc_milli=2000).to_bytes(), key=b"n1")
    assert w.nodes["n1"]["cpu_alloc_milli"] == 2000


async def test_a_report_from_a_clock_far_ahead_is_deadlettered_and_later_ones_apply(
    worker: tuple[Worker, Sent],
) -> None:
    """A report stamped far ahead (an agent whose clock jumped) is refused with the reason; applied,
    it hid every later report of the node until that time, 'unhealthy' included."""
    w, sent = worker
    now = datetime.now(UTC)
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry(at=datetime(2299, 1, 1, tzinfo=UTC)).to_bytes(), key=b"n1")
        await put(a, telemetry(at=now + timedelta(seconds=200)).to_bytes(), key=b"n1")  # within the 300 s
        await put(a, telemetry(at=now + timedelta(seconds=201), healthy=False).to_bytes(), key=b"n1")
    assert w.nodes["n1"]["healthy"] is False and w.counters.telemetry == 2
    [dl] = sent.deadletters()
    assert dl.topic == "nodes.telemetry" and "ahead of the worker's clock" in dl.reason
    assert "SEMSCHED_MAX_CLOCK_SKEW=300 s" in dl.reason


async def test_a_submission_from_a_clock_far_ahead_is_deadlettered(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("j1", event_time=datetime.now(UTC) + timedelta(hours=2)).to_bytes(), key=b"j1")
        await put(a, job("j2").to_bytes(), key=b"j2")
    assert list(w.pending.keys()) == ["j2"]
    [dl] = sent.deadletters()
    assert dl.topic == "jobs.submitted" and "7,200 s ahead of the worker's clock" in dl.reason


async def test_a_node_or_job_id_another_cluster_of_this_worker_holds_is_deadlettered(
    worker: tuple[Worker, Sent],
) -> None:
    """c1 and c3 share partition 1, so one worker holds both; the tables are keyed by node and job id
    alone. c3's node n1 replaced c1's (or was skipped as late) with nothing said: now dead-lettered."""
    w, sent = worker
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry("n1").to_bytes(), key=b"n1")
        await put(a, telemetry("n1", cluster="c3", at=T0 + timedelta(seconds=5)).to_bytes(), key=b"n1")
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("j1").to_bytes(), key=b"j1")
        await put(a, job("j1", cluster="c3", event_id="ev-c3-j1").to_bytes(), key=b"j1")
    assert w.nodes["n1"]["cluster"] == "c1" and w.pending["j1"]["job"]["cluster"] == "c1"
    node, submission = sent.deadletters()
    assert "node id 'n1' is cluster 'c1''s on this worker" in node.reason
    assert "job id 'j1' is cluster 'c1''s on this worker" in submission.reason


async def test_malformed_telemetry_is_deadlettered(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    bad = json.loads(telemetry().to_bytes())
    bad["gpu_model"] = "Voodoo5"
    async with drive(w, "nodes.telemetry") as a:
        await put(a, json.dumps(bad).encode(), key=b"n1")
        await put(a, telemetry("n2").to_bytes(), key=b"n2")
    assert list(w.nodes.keys()) == ["n2"]
    [dl] = sent.deadletters()
    assert dl.topic == "nodes.telemetry" and "unknown GPU model 'Voodoo5'" in dl.reason


# -- decisions and lifecycle ----------------------------------------------------------------


def placed(job_id: str = "j1", attempt: int = 0, node_id: str | None = "n1", outcome: str = "placed",
           reason: str = "best fit") -> DecisionRecord:  # fmt: skip
    did = decision_id_for(job_id, attempt, f"ev-{job_id}")
    return DecisionRecord(event_id=did, decision_id=did, job_id=job_id, cluster="c1", attempt=attempt,
                          outcome=outcome, node_id=node_id, gpu_indices=[2] if node_id else [],
                          policy="best-fit", latency_ms=1.0, reason=reason, event_time=T0)  # fmt: skip


async def _submit(w: Worker, *jobs: JobSubmitted) -> None:
    async with drive(w, "jobs.submitted") as a:
        for j in jobs:
            await put(a, j.to_bytes(), key=j.job_id.encode())


async def test_placement_decision_moves_pending_to_running_and_clears_inflight(
    worker: tuple[Worker, Sent],
) -> None:
    w, sent = worker
    await _submit(w, job("j1"))
    rec = placed("j1")
    w.inflight["j1"] = (rec, None)  # as the loop leaves it after publishing
    async with drive(w, "decisions") as a:
        await put(a, rec.to_bytes(), key=b"j1", partition=1)
        assert "j1" not in w.pending
        r = w.running["j1"]
        assert r["state"] == "reserved" and r["node_id"] == "n1" and r["gpu_indices"] == [2]
        assert r["decision_id"] == rec.decision_id
        assert w.inflight == {}
        assert w.applied_offsets == {1: 0}
        await put(a, rec.to_bytes(), key=b"j1", partition=1)  # the same decision again
    assert w.running["j1"]["decision_id"] == rec.decision_id and "j1" not in w.pending
    assert w.counters.decisions_applied == 2
    assert w.applied_offsets == {1: 1}
    assert sent.by_topic == {}


async def test_decision_for_another_job_keeps_inflight(worker: tuple[Worker, Sent]) -> None:
    w, _ = worker
    await _submit(w, job("j1"), job("j2"))
    mine = placed("j2")
    w.inflight["j2"] = (mine, None)
    async with drive(w, "decisions") as a:
        await put(a, placed("j1").to_bytes(), key=b"j1")
    assert "j1" in w.running and "j2" in w.pending
    assert w.inflight == {"j2": (mine, None)}


async def test_rejection_decision_moves_to_done_and_publishes_a_notice(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    await _submit(w, job("j1"))
    async with drive(w, "decisions") as a:
        await put(a, placed("j1", node_id=None, outcome="rejected", reason="needs 99 GPUs").to_bytes(),
                  key=b"j1", partition=partition_for("c1", 4))  # fmt: skip
    assert "j1" not in w.pending
    assert w.done["j1"]["status"] == "rejected" and w.done["j1"]["reason"] == "needs 99 GPUs"
    [n] = sent.lifecycle()
    assert (n.job_id, n.state, n.reason) == ("j1", "rejected", "needs 99 GPUs")
    assert sent.by_topic["jobs.lifecycle"][0]["key"] == b"j1"
    assert sent.by_topic["jobs.lifecycle"][0]["partition"] == partition_for("c1", 4)


async def test_the_restart_gate_counts_a_decision_once_it_is_applied_not_when_read(
        worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A replayed rejection waits on the broker (its notice) before it moves the job to done: the gate
    (``applied_offsets``) opened meanwhile, and a step could decide the job again under the same id
    (found by review). The same for the lifecycle gate's offsets."""
    w, sent = worker
    await _submit(w, job("j1"))
    seen: list[dict[int, int]] = []
    publish = w.publish

    async def watching(topic: str, *args: Any, **kwargs: Any) -> asyncio.Future[None]:
        if topic.endswith("jobs.lifecycle"):
            seen.append(dict(w.applied_offsets))  # while the rejection is being applied
        return await publish(topic, *args, **kwargs)

    monkeypatch.setattr(w, "publish", watching)
    async with drive(w, "decisions") as a:
        await put(a, placed("j1", node_id=None, outcome="rejected", reason="needs 99 GPUs").to_bytes(),
                  key=b"j1", partition=1)  # fmt: skip
    assert seen == [{}] and w.applied_offsets == {1: 0} and w.done["j1"]["status"] == "rejected"


async def test_a_notice_the_broker_refuses_dead_letters_its_decision_and_changes_nothing(
    worker: tuple[Worker, Sent],
) -> None:
    # the rejection notice must be on the broker before the job moves to done: when the broker
    # refuses it, the decision is dead-lettered with that reason and the job stays pending
    w, sent = worker
    await _submit(w, job("j1"))
    before = snapshot(w)
    sent.refuse = "jobs.lifecycle"
    async with drive(w, "decisions") as a:
        await put(a, placed("j1", node_id=None, outcome="rejected", reason="needs 99 GPUs").to_bytes(), key=b"j1")
    assert snapshot(w) == before
    [dl] = sent.deadletters()
    assert dl.topic == "decisions" and "MessageSizeTooLargeError on jobs.lifecycle" in dl.reason


async def test_a_dead_letter_the_broker_refuses_is_tried_again_until_it_takes_it(
    worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A malformed event is handled only once its dead letter is on the broker: a refusal (a
    timeout, a leader moving) is tried again, and the events after it wait, none lost."""
    import streams.app

    monkeypatch.setattr(streams.app, "DEADLETTER_RETRY_S", (0.01, 0.02))
    w, sent = worker
    held: list[int] = []  # while waiting to try again, the offset watch is told to hold its clocks
    sleep = asyncio.sleep

    async def waiting(seconds: float) -> None:
        held.append(w.deadletters_retrying)
        await sleep(seconds)

    monkeypatch.setattr(streams.app, "asyncio", types.SimpleNamespace(sleep=waiting, gather=asyncio.gather))
    sent.refuse, sent.refusals = "deadletter", 3
    async with drive(w, "jobs.submitted") as a:
        await put(a, b"{not json", key=b"bad")
        await put(a, job("j1").to_bytes(), key=b"j1")
    [dl] = sent.deadletters()
    assert dl.topic == "jobs.submitted" and dl.key == "bad"
    assert w.counters.deadletter_retries == 3 and w.counters.deadletters == 1
    assert held == [1, 1, 1] and w.deadletters_retrying == 0
    assert set(w.pending.keys()) == {"j1"}


async def test_handler_error_is_deadlettered_and_tables_stay(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    await _submit(w, job("j1"))
    before = snapshot(w)
    async with drive(w, "decisions") as a:
        # decodes fine but a placement without a node makes on_decision fail
        await put(a, placed("j1", node_id=None).to_bytes(), key=b"j1")
        assert snapshot(w) == before
        await put(a, placed("j1").to_bytes(), key=b"j1")
    assert "j1" in w.running
    [dl] = sent.deadletters()
    assert dl.topic == "decisions" and dl.reason.startswith("internal error while handling: AssertionError")


async def test_lifecycle_started_then_finished_moves_to_done(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    await _submit(w, job("j1"))
    rec = placed("j1")
    async with drive(w, "decisions") as a:
        await put(a, rec.to_bytes(), key=b"j1")

    def ev(state: str, **kw: Any) -> bytes:
        return JobLifecycle(job_id="j1", cluster="c1", state=state, decision_id=rec.decision_id, node_id="n1",
                            **kw).to_bytes()  # fmt: skip

    async with drive(w, "jobs.lifecycle") as a:
        await put(a, ev("started"), key=b"j1")
        assert w.running["j1"]["state"] == "running"
        await put(a, ev("finished", exit_code=0), key=b"j1")
    assert "j1" not in w.running and "j1" not in w.pending
    done = dict(w.done["j1"])
    assert time.time() - done.pop("done_ts") < 60  # when it ended (streams/done_retention.py forgets it from then)
    assert time.time() - done.pop("ended_at") < 60  # as its agent said
    assert done == {"job_id": "j1", "event_id": "ev-j1", "status": "finished", "attempt": 0, "reason": "",
                    "gang_id": None, "cluster": "c1", "node_id": "n1"}
    assert w.counters.lifecycle == 2
    assert sent.by_topic == {}


async def test_the_lifecycle_offsets_handled_are_what_a_step_has_handled(worker: tuple[Worker, Sent],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``lifecycle_handled``: per partition, the offset after the last report handled (applied, refused or
    dead-lettered alike), never going back: the state a step's snapshot saw (its decisions record it).
    It moves once a report is handled, not before: a step may run while one is being applied."""
    import streams.agents

    w, _ = worker
    during: list[int | None] = []
    apply = streams.agents.apply_lifecycle

    async def watched(w: Worker, ev: JobLifecycle, partition: int) -> None:
        during.append(w.lifecycle_handled.get(partition))
        await apply(w, ev, partition)

    monkeypatch.setattr(streams.agents, "apply_lifecycle", watched)
    rec = placed("j1")
    await _submit(w, job("j1"))
    async with drive(w, "decisions") as a:
        await put(a, rec.to_bytes(), key=b"j1")
    part = partition_for("c1", 4)
    assert part not in w.lifecycle_handled
    async with drive(w, "jobs.lifecycle") as a:
        report = JobLifecycle(job_id="j1", cluster="c1", state="started", decision_id=rec.decision_id, node_id="n1")
        await put(a, report.to_bytes(), key=b"j1", offset=5)
        assert w.lifecycle_handled[part] == 6 and w.running["j1"]["state"] == "running" and during == [None]
        await put(a, b"{not json", key=b"j1", partition=part, offset=6)  # dead-lettered: handled all the same
        assert w.lifecycle_handled[part] == 7
        await put(a, report.to_bytes(), key=b"j1", offset=2)  # a redelivery of an older one
        assert w.lifecycle_handled[part] == 7


async def _placed_j1(w: Worker) -> tuple[JobSubmitted, DecisionRecord]:
    submitted, rec = job("j1"), placed("j1")
    await _submit(w, submitted)
    async with drive(w, "decisions") as a:
        await put(a, rec.to_bytes(), key=b"j1")
    return submitted, rec


async def test_a_finished_job_teaches_the_duration_predictor_its_run_time(worker: tuple[Worker, Sent]) -> None:
    from scheduling.job import JobRequest

    w, _ = worker
    submitted, rec = await _placed_j1(w)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with drive(w, "jobs.lifecycle") as a:
        for state, at in (("started", t0), ("finished", t0 + timedelta(seconds=42))):
            await put(a, JobLifecycle(job_id="j1", cluster="c1", state=state, decision_id=rec.decision_id,
                                      node_id="n1", event_time=at).to_bytes(), key=b"j1")  # fmt: skip
    assert w.durations.predict(JobRequest.from_event(submitted)) == pytest.approx(42.0)


@pytest.mark.parametrize("warmed_cluster", ["c1", "c2"])
async def test_a_finished_job_the_warm_up_taught_is_not_taught_twice(worker: tuple[Worker, Sent],
                                                                    warmed_cluster: str) -> None:  # fmt: skip
    """A job the start-up warm-up read from the archive (streams/duration_warm_up.py) finished before the
    restart; its ``finished``, read again from the log, must not count a second time. Another cluster's
    job of the same id is another job (found by review: by id alone, it kept this one's run time untaught)."""
    from scheduling.job import JobRequest

    w, _ = worker
    submitted, rec = await _placed_j1(w)
    w.durations_warmed = {(warmed_cluster, "j1")}
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with drive(w, "jobs.lifecycle") as a:
        for state, at in (("started", t0), ("finished", t0 + timedelta(seconds=42))):
            await put(a, JobLifecycle(job_id="j1", cluster="c1", state=state, decision_id=rec.decision_id,
                                      node_id="n1", event_time=at).to_bytes(), key=b"j1")  # fmt: skip
    if warmed_cluster == "c1":
        assert set(w.durations.samples(JobRequest.from_event(submitted)).values()) == {0}
    else:
        assert w.durations.predict(JobRequest.from_event(submitted)) == pytest.approx(42.0)
    assert w.done["j1"]["status"] == "finished"  # the report itself is applied as ever


async def test_a_stale_finished_does_not_teach_the_duration_predictor(worker: tuple[Worker, Sent]) -> None:
    """An earlier placement's ``finished`` (its node was lost, the job moved; its agent reports late)
    is not the run time of the placement running now (found by review: 3 s was learned)."""
    from scheduling.job import JobRequest

    w, _ = worker
    submitted, rec = await _placed_j1(w)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, JobLifecycle(job_id="j1", cluster="c1", state="started", decision_id=rec.decision_id,
                                  node_id="n1", event_time=t0).to_bytes(), key=b"j1")  # fmt: skip
        for decision_id, node in (("an-earlier-placement", "n1"), (rec.decision_id, "n2")):
            await put(a, JobLifecycle(job_id="j1", cluster="c1", state="finished", decision_id=decision_id,
                                      node_id=node, event_time=t0 + timedelta(seconds=3)).to_bytes(), key=b"j1")  # fmt: skip
    assert w.durations.predict(JobRequest.from_event(submitted)) != pytest.approx(3.0)
    assert w.running["j1"]["state"] == "running"


async def test_lifecycle_failed_requeues_and_gives_up_after_max_retries(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker  # max_retries=3
    await _submit(w, job("j1"))
    for attempt in range(4):
        async with drive(w, "decisions") as a:
            await put(a, placed("j1", attempt=attempt).to_bytes(), key=b"j1")
        assert w.running["j1"]["attempt"] == attempt
        async with drive(w, "jobs.lifecycle") as a:
            await put(a, JobLifecycle(job_id="j1", cluster="c1", state="failed", attempt=attempt,
                                      decision_id=decision_id_for("j1", attempt, "ev-j1"), reason="exit 3").to_bytes(),
                      key=b"j1")  # fmt: skip
        if attempt < 3:
            assert w.pending["j1"]["attempt"] == attempt + 1 and "j1" not in w.done
    assert "j1" not in w.pending and "j1" not in w.running
    assert w.done["j1"]["status"] == "rejected"
    assert w.done["j1"]["reason"] == "gave up after 4 failed attempt(s) (max_retries=3); last: failed: exit 3"
    [n] = sent.lifecycle()
    assert n.state == "rejected" and n.reason == w.done["j1"]["reason"]


async def test_a_held_report_that_fails_is_dead_lettered_itself_not_its_submission(
    worker: tuple[Worker, Sent],
) -> None:
    """Reports that came before their job wait for it; when one of them fails as the submission
    releases it (here the broker refuses its rejection notice once), that report is dead-lettered,
    and can be retried from there. Before, the submission (applied already) was dead-lettered
    instead and the report lost: j1 held n1 as running for ever."""
    w, sent = worker
    w.settings.max_retries = 0
    did = decision_id_for("j1", 0, "ev-j1")
    started = JobLifecycle(job_id="j1", cluster="c1", state="started", decision_id=did, node_id="n1")
    failed = JobLifecycle(job_id="j1", cluster="c1", state="failed", decision_id=did, node_id="n1", reason="oom")
    async with drive(w, "jobs.lifecycle") as a:  # a restart's backlog: the reports come first
        await put(a, started.to_bytes(), key=b"j1")
        failed_as_sent = json.dumps(json.loads(failed.to_bytes()), indent=1).encode()  # (as a producer wrote it)
        await put(a, failed_as_sent, key=b"j1")
    assert len(w.early_reports) == 2
    sent.refuse, sent.refusals = "jobs.lifecycle", 1
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("j1").to_bytes(), key=b"j1")
    [dl] = sent.deadletters()
    assert (dl.topic, dl.offset) == ("jobs.lifecycle", 1) and "MessageSizeTooLargeError" in dl.reason
    assert dl.original() == failed_as_sent  # the bytes it came with, not a re-encoding
    assert w.running["j1"]["state"] == "running" and len(w.early_reports) == 0
    async with drive(w, "jobs.lifecycle") as a:  # the dead letter retried
        await put(a, dl.original(), key=b"j1")
    assert w.done["j1"]["status"] == "rejected" and "j1" not in w.running


async def test_a_report_whose_job_never_comes_is_handled_when_its_wait_runs_out(worker: tuple[Worker, Sent]) -> None:
    """A ``started`` held for a submission that never comes: once ``EARLY_REPORT_WAIT_S`` has passed
    (the worker's one-second timer) it is a report about a placement never known, and the run is
    fenced. Only the holding was tested before (found by the test review)."""
    import time

    from streams.agents import expire_early_reports
    from streams.app import EARLY_REPORT_WAIT_S

    w, sent = worker
    did = decision_id_for("ghost", 0, "ev-ghost")
    started = JobLifecycle(job_id="ghost", cluster="c1", state="started", decision_id=did, node_id="n1")
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, started.to_bytes(), key=b"ghost")
    assert len(w.early_reports) == 1 and not sent.by_topic.get("actions")
    held = {TP(w.settings.topic("jobs.lifecycle"), partition_for("c1", 4))}  # its partition is this worker's
    w.app.consumer.assignment = lambda: held  # type: ignore[method-assign]
    await expire_early_reports(w, time.time() + EARLY_REPORT_WAIT_S / 2)  # still within its wait
    assert len(w.early_reports) == 1 and not sent.by_topic.get("actions")
    w.app.rebalancing = True  # its partition may be about to go (the assignment is the old one): not yet
    await expire_early_reports(w, time.time() + EARLY_REPORT_WAIT_S + 1)
    assert len(w.early_reports) == 1 and not sent.by_topic.get("actions")
    w.app.rebalancing = False
    await expire_early_reports(w, time.time() + EARLY_REPORT_WAIT_S + 1)
    [fence] = [decode("actions", s["value"]) for s in sent.by_topic.get("actions", [])]
    assert (fence.kind, fence.job_id, fence.node_id, fence.target_decision_id) == ("preempt", "ghost", "n1", did)
    assert len(w.early_reports) == 0 and "ghost" not in w.running and w.counters.lifecycle == 1


async def test_stale_lifecycle_is_ignored(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    await _submit(w, job("j1"))
    async with drive(w, "decisions") as a:
        await put(a, placed("j1").to_bytes(), key=b"j1")
    before = snapshot(w)
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, JobLifecycle(job_id="j1", cluster="c1", state="finished", decision_id="someone-else")
                  .to_bytes(), key=b"j1")  # fmt: skip
        await put(a, JobLifecycle(job_id="nope", cluster="c1", state="failed", decision_id="d-nope").to_bytes(), key=b"nope")
    assert snapshot(w) == before
    assert sent.by_topic == {}


async def test_the_started_of_a_finished_job_read_again_sends_no_fence(worker: tuple[Worker, Sent]) -> None:
    """A restarted worker reads the lifecycle partition again from its committed offset: the ``started`` of
    a job that has finished since sent a fence for it (601 of 1,000 jobs in a chaos run)."""
    w, sent = worker
    await _submit(w, job("j1"))
    async with drive(w, "decisions") as a:
        await put(a, placed("j1").to_bytes(), key=b"j1")
    did = decision_id_for("j1", 0, "ev-j1")
    started = JobLifecycle(job_id="j1", cluster="c1", state="started", decision_id=did, node_id="n1", event_time=T0)
    finished = started.model_copy(update={"state": "finished", "event_time": T0 + timedelta(seconds=5),
                                          "event_id": "ev-finished"})  # fmt: skip
    async with drive(w, "jobs.lifecycle") as a:
        for report in (started, finished, started):  # the last one read again
            await put(a, report.to_bytes(), key=b"j1")
    assert w.done["j1"]["status"] == "finished" and "j1" not in w.running
    assert "actions" not in sent.by_topic and w.counters.notes.get("started of a run that has finished") == 1


async def test_reports_from_another_node_than_the_runs_are_counted_under_one_note(worker: tuple[Worker, Sent]) -> None:
    """/status counts notes by the text before ':'; that of a second execution's report named both nodes,
    so each pair became a key of its own (found by review: /status and memory grew with them)."""
    w, sent = worker
    await _submit(w, job("j1"))
    async with drive(w, "decisions") as a:
        await put(a, placed("j1").to_bytes(), key=b"j1")
    did = decision_id_for("j1", 0, "ev-j1")
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, JobLifecycle(job_id="j1", cluster="c1", state="started", decision_id=did, node_id="n1")
                  .to_bytes(), key=b"j1")  # fmt: skip
        for other in ("n7", "n8"):
            await put(a, JobLifecycle(job_id="j1", cluster="c1", state="failed", decision_id=did, node_id=other)
                      .to_bytes(), key=b"j1")  # fmt: skip
    assert w.running["j1"]["node_id"] == "n1"
    assert w.counters.notes.get("report from another node than the run's, ignored") == 2
    assert not any("n7" in k or "n8" in k for k in w.counters.notes), w.counters.notes


async def test_an_event_on_another_clusters_partition_is_dead_lettered(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    wrong = (partition_for("c1", 4) + 1) % 4
    async with drive(w, "jobs.submitted") as a:
        await put(a, job("j1").to_bytes(), key=b"j1", partition=wrong)
        await put(a, job("j2").to_bytes(), key=b"j2")
    assert "j1" not in w.pending and "j2" in w.pending
    [dl] = sent.deadletters()
    assert f"arrived on partition {wrong}" in dl.reason and "partition_for" in dl.reason


async def test_a_skipped_input_offset_is_sought_back_to_and_handled_in_order(worker: tuple[Worker, Sent]) -> None:
    w, sent = worker
    part = partition_for("c1", 4)
    name = w.topics["nodes.telemetry"].get_topic_name()
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry("n1").to_bytes(), key=b"n1")  # offset 0
        await put(a, telemetry("n2").to_bytes(), key=b"n2")  # offset 1
        assert (w.counters.offset_gaps, sent.seeks) == (0, [])
        await put(a, telemetry("n5").to_bytes(), key=b"n5", offset=5)  # 2..4 never reached the agent
        assert w.counters.offset_gaps == 1 and sent.seeks == [(name, part, 2)]
        assert "n5" not in w.nodes  # not handled yet: it comes again after 2..4
        await put(a, telemetry("n6").to_bytes(), key=b"n6", offset=6)  # queued before the seek took effect
        assert "n6" not in w.nodes and len(sent.seeks) == 1
        for i, node in enumerate(("n3", "n4", "n4b", "n5", "n6"), start=2):  # the seek: 2.. again, in order
            await put(a, telemetry(node).to_bytes(), key=node.encode(), offset=i)
        assert {"n3", "n4", "n4b", "n5", "n6"} <= set(w.nodes)
        await put(a, telemetry("n2").to_bytes(), key=b"n2", offset=1)  # a rebalance re-reads: no gap
        await put(a, telemetry("n3").to_bytes(), key=b"n3", offset=2)
    assert w.counters.offset_gaps == 1 and len(sent.seeks) == 1
    assert w.counters.telemetry == 9  # 0, 1, then 2..6 once, then 1, 2 again: never 5 or 6 out of order


async def test_a_first_event_past_where_consumption_starts_is_a_gap(worker: tuple[Worker, Sent]) -> None:
    # the group's committed offset is 2; Faust delivers 5 first (it dropped what it fetched first)
    w, sent = worker
    part = partition_for("c1", 4)
    name = w.topics["nodes.telemetry"].get_topic_name()
    sent.starts = {(name, part): 2}
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry("n5").to_bytes(), key=b"n5", offset=5)
        assert sent.seeks == [(name, part, 2)] and "n5" not in w.nodes
        for i in (2, 3, 4, 5):
            await put(a, telemetry(f"n{i}").to_bytes(), key=f"n{i}".encode(), offset=i)
    assert {"n2", "n3", "n4", "n5"} == set(w.nodes) and w.counters.offset_gaps == 1


async def test_a_partition_revoked_and_given_back_is_no_gap(worker: tuple[Worker, Sent]) -> None:
    from faust.types import TP

    w, _ = worker
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry("n1").to_bytes(), key=b"n1")  # offset 0 on the cluster's partition
        partition = partition_for("c1", 4)
        await w.app.on_partitions_revoked.send({TP(w.topics["nodes.telemetry"].get_topic_name(), partition)})
        # another worker handled 1..6 while the partition was away
        await put(a, telemetry("n2").to_bytes(), key=b"n2", offset=7)
    assert w.counters.offset_gaps == 0 and "n2" in w.nodes


async def test_a_lifecycle_report_stamped_far_ahead_of_the_clock_is_deadlettered(worker: tuple[Worker, Sent]) -> None:
    """Found by review: only submissions and telemetry were checked against the worker's clock; a `finished`
    stamped in 2299 was applied, and taught the duration estimate a run time of 273 years."""
    from scheduling.job import JobRequest

    w, sent = worker
    submitted, rec = await _placed_j1(w)
    t0 = datetime.now(UTC)
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, JobLifecycle(job_id="j1", cluster="c1", state="started", decision_id=rec.decision_id,
                                  node_id="n1", event_time=t0).to_bytes(), key=b"j1")  # fmt: skip
        await put(a, JobLifecycle(job_id="j1", cluster="c1", state="finished", decision_id=rec.decision_id,
                                  node_id="n1", event_time=datetime(2299, 1, 1, tzinfo=UTC)).to_bytes(), key=b"j1")  # fmt: skip
    (dead,) = sent.deadletters()
    assert "ahead of the worker's clock" in dead.reason and dead.topic == "jobs.lifecycle"
    assert w.running["j1"]["state"] == "running" and "j1" not in w.done
    assert (w.durations.predict(JobRequest.from_event(submitted)) or 0) < 1e9  # (None: nothing learned)


async def test_a_lifecycle_report_naming_another_cluster_is_deadlettered(worker: tuple[Worker, Sent]) -> None:
    """Found by review: a submission of another cluster's job id is refused, a lifecycle report was not: one
    naming another cluster (or none: "default") was applied to this cluster's job of that id."""
    w, sent = worker
    _, rec = await _placed_j1(w)
    async with drive(w, "jobs.lifecycle") as a:
        await put(a, JobLifecycle(job_id="j1", cluster="c0", state="started", decision_id=rec.decision_id,
                                  node_id="n1").to_bytes(), key=b"j1")  # fmt: skip
    (dead,) = sent.deadletters()
    assert "names cluster 'c0': the job is cluster 'c1'" in dead.reason, dead.reason
    assert w.running["j1"]["state"] == "reserved"
