"""Trace replay: pacing and ordering against a recording publisher and a fake clock (no
broker), the CLI command, and (``integration``) a replay into a real Kafka broker that is
consumed back event for event."""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
import typer
from aiokafka import AIOKafkaConsumer
from typer.testing import CliRunner

from ops.cli.replay import parse_options, parse_sample, replay_command
from ops.replay import ReplayStats, due_times, replay
from ops.traces import TraceLineError, get_loader
from ops.traces.published import replay_event_id, replay_source
from scheduling.events import Event, JobSubmitted, NodeTelemetry
from streams.settings import Settings

pytest_plugins = ["tests.conftest_kafka"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
OPENB = FIXTURES / "alibaba-gpu-2023"
JSONL = FIXTURES / "jsonl" / "events.jsonl"


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


class Recorder:
    """Stands in for EventProducer: records (topic, event, clock time)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[str, Event, float]] = []

    def __call__(self, settings: Settings) -> Recorder:
        return self

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def send(self, topic: str, event: Event, *, cluster: str | None = None) -> None:
        self.sent.append((topic, event, self.clock.now()))

    async def flush(self) -> None:
        return None


def _run(loader, **kw) -> tuple[ReplayStats, Recorder, FakeClock]:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    rec = Recorder(clock)
    kw.setdefault("speed", 1.0)
    stats = asyncio.run(replay(loader, Settings(bootstrap="unused:1"), progress=False, clock=clock,
                               create_topics=False, producer_factory=rec, **kw))  # fmt: skip
    return stats, rec, clock


def test_nodes_first_then_jobs_paced_by_speed() -> None:
    loader = get_loader("jsonl", JSONL)  # jobs at offsets 0, 0, 5.5, 30
    stats, rec, _ = _run(loader, speed=2.0)
    topics = [t for t, _, _ in rec.sent]
    assert topics == ["nodes.telemetry"] * 2 + ["jobs.submitted"] * 4
    job_times = [t for topic, _, t in rec.sent if topic == "jobs.submitted"]
    assert [round(t - job_times[0], 6) for t in job_times] == [0, 0, 2.75, 15]
    assert (stats.nodes, stats.jobs, stats.skipped_lines, stats.trace_span_s) == (2, 4, 0, 30)
    assert stats.slept_s == pytest.approx(15)
    sent_jobs = [e for topic, e, _ in rec.sent if topic == "jobs.submitted"]
    assert [e.event_id for e in sent_jobs] == ["job-a", "job-d", "job-c", "job-b"]  # ids kept
    assert all(
        e.event_time.year >= 2026 and e.event_time != j.event.event_time
        for e, j in zip(sent_jobs, loader.jobs(), strict=True)
    )  # re-stamped at publish


def test_a_paced_job_is_not_late_by_the_flush_before_the_wait() -> None:
    """Found by review: the wait was reckoned before the flush that precedes it, then slept whole, so
    every paced submission went out late by the time the flush took."""

    class SlowFlush(Recorder):
        async def flush(self) -> None:
            self.clock.t += 0.5

    clock = FakeClock()
    rec = SlowFlush(clock)
    stats = asyncio.run(replay(get_loader("jsonl", JSONL), Settings(bootstrap="unused:1"), speed=2.0, progress=False,
                               clock=clock, create_topics=False, producer_factory=rec))  # fmt: skip
    job_times = [t for topic, _, t in rec.sent if topic == "jobs.submitted"]
    assert [round(t - job_times[0], 6) for t in job_times] == [0, 0, 2.75, 15]  # on time: 2.75, 15
    assert stats.slept_s == pytest.approx(15 - 2 * 0.5)


def test_a_replay_run_again_publishes_each_job_under_the_id_it_had() -> None:
    """Resumed after an interruption, a replay sends what it sent before under the same ids, which
    the worker takes for redeliveries (found by review: each run drew new ids, and every job
    already sent was dead-lettered as a reused job id); another file gives other ids."""
    def ids(path: Path) -> list[str]:
        _, rec, _ = _run(get_loader("openb", path), speed=0.0)
        return [e.event_id for topic, e, _ in rec.sent if topic == "jobs.submitted"]

    first, again = ids(OPENB), ids(OPENB)
    assert first == again and len(set(first)) == len(first) > 10
    copy = Path(tempfile.mkdtemp()) / "openb"
    shutil.copytree(OPENB, copy)
    assert set(ids(copy)).isdisjoint(first)
    job = JobSubmitted(job_id="j", event_id="given-by-the-trace")
    assert replay_event_id("a", job) != replay_event_id("b", job)


def test_a_replay_resumed_through_the_traces_directory_keeps_the_ids_of_its_file() -> None:
    """Found by review: the pod file and its directory (``--path``) gave each job two ids, and a replay
    resumed through the other dead-lettered every job it had sent as a reused job id."""
    def ids(path: Path) -> list[str]:
        _, rec, _ = _run(get_loader("openb", path), speed=0.0)
        return [e.event_id for topic, e, _ in rec.sent if topic == "jobs.submitted"]

    assert ids(OPENB) == ids(OPENB / "openb_pod_list_default.csv")


def test_a_job_id_reused_for_another_request_gets_another_replay_id() -> None:
    """Found by review: a trace file written again, reusing a job id for another request, replayed it under
    the old id; the worker took it for a redelivery of the job it had accepted, and the new one never ran.
    Under another id the worker dead-letters it as a reused job id."""
    job = JobSubmitted(job_id="j1", cluster="c1", cpu_milli=1000)
    assert replay_event_id("a", job) == replay_event_id("a", job.model_copy(update={"event_time": job.event_time}))
    assert replay_event_id("a", job) != replay_event_id("a", job.model_copy(update={"cpu_milli": 4000}))


def test_the_inventory_hook_runs_after_the_nodes_and_before_the_first_job() -> None:
    seen: list[tuple[int, list[str]]] = []
    rec_box: list[Recorder] = []

    async def published(nodes: int) -> None:
        seen.append((nodes, [t for t, _, _ in rec_box[0].sent]))

    clock = FakeClock()
    rec = Recorder(clock)
    rec_box.append(rec)
    asyncio.run(replay(get_loader("jsonl", JSONL), Settings(bootstrap="unused:1"), speed=0.0, progress=False,
                       clock=clock, create_topics=False, producer_factory=rec, inventory_published=published))  # fmt: skip
    assert seen == [(2, ["nodes.telemetry"] * 2)]
    assert len(rec.sent) == 6


@pytest.mark.parametrize("speed", [0.0, math.inf])
def test_as_fast_as_possible(speed: float) -> None:
    stats, rec, clock = _run(get_loader("jsonl", JSONL), speed=speed)
    assert clock.sleeps == [] and stats.jobs == 4


def test_max_gap_and_limit() -> None:
    stats, rec, clock = _run(get_loader("openb", OPENB), speed=1.0, max_gap_s=1.0, limit=10)
    assert stats.jobs == 10 and stats.filtered["over_limit"] == 44
    assert all(s <= 1.0 + 1e-9 for s in clock.sleeps) and len(clock.sleeps) == 9
    assert due_times([0, 10, 10, 40], 10.0, None) == [0, 1, 1, 4]
    assert due_times([0, 10, 40], 1.0, 5.0) == [0, 5, 10]
    with pytest.raises(ValueError):
        due_times([0, 1], -1.0, None)
    for gap in (-1.0, math.nan):
        with pytest.raises(ValueError, match="max_gap must be >= 0"):
            due_times([0, 1], 1.0, gap)


def test_strict_raises_before_publishing() -> None:
    loader = get_loader(
        "openb", OPENB / "openb_pod_list_broken.csv", nodes_path=OPENB / "openb_node_list_gpu_node.csv"
    )
    clock = FakeClock()
    rec = Recorder(clock)
    with pytest.raises(TraceLineError) as ei:
        asyncio.run(replay(loader, Settings(bootstrap="unused:1"), speed=0, strict=True, progress=False,
                           clock=clock, create_topics=False, producer_factory=rec))  # fmt: skip
    assert ei.value.line == 4 and rec.sent == []


def test_default_skips_and_reports() -> None:
    loader = get_loader(
        "openb", OPENB / "openb_pod_list_broken.csv", nodes_path=OPENB / "openb_node_list_gpu_node.csv"
    )
    stats, rec, _ = _run(loader, speed=0)
    assert stats.jobs == 49 and stats.skipped_lines == 5
    assert [e.line for e in stats.first_errors] == [4, 7, 10, 13, 16]


# ----------------------------------------------------------------------------- CLI


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("replay")(replay_command)
    app.command("other")(lambda: None)  # force sub-command mode, as in the main CLI
    return app


def test_cli_dry_run_summary() -> None:
    r = CliRunner().invoke(_cli(), ["replay", "openb", "--path", str(OPENB), "--dry-run", "--max-duration", "3600"],
                           env={"COLUMNS": "200"})  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "dry run" in r.output and "duration_unknown" in r.output and "1,213" not in r.output


def test_cli_strict_prints_file_line_and_exits_1() -> None:
    broken = OPENB / "openb_pod_list_broken.csv"
    r = CliRunner().invoke(_cli(), ["replay", "openb", "--path", str(broken), "--strict",
                                    "--bootstrap", "127.0.0.1:9"])  # fmt: skip
    assert r.exit_code == 1
    assert f"{broken}:4: cpu_milli is not a number: 'abc'" in r.output


def test_cli_default_prints_skipped_lines_and_exits_1() -> None:
    """The good lines are replayed (49 jobs), the bad ones listed with FILE:LINE, and the exit code
    says the file was not clean."""
    broken = OPENB / "openb_pod_list_broken.csv"
    r = CliRunner().invoke(
        _cli(), ["replay", "openb", "--path", str(broken), "--dry-run"], env={"COLUMNS": "200"}
    )
    assert r.exit_code == 1, r.output
    assert "5 bad line(s) skipped" in r.output and f"{broken}:7: expected 11 fields, got 10" in r.output
    assert "49" in r.output  # jobs (the summary is printed first)


def test_cli_dry_run_lists_every_bad_line(tmp_path: Path) -> None:
    """Found by review: only the first 5 bad lines were ever listed, a file fixed 5 lines per run."""
    good = (OPENB / "openb_pod_list_broken.csv").read_text().splitlines()[:3]  # the header and two good pods
    broken = tmp_path / "pods.csv"
    (tmp_path / "openb_node_list_gpu_node.csv").write_text((OPENB / "openb_node_list_gpu_node.csv").read_text())
    broken.write_text("\n".join(good + [f"bad-pod-{i},1" for i in range(8)]) + "\n")
    r = CliRunner().invoke(_cli(), ["replay", "openb", "--path", str(broken), "--dry-run"], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert "8 bad line(s) skipped:" in r.output and "more" not in r.output
    assert all(f"{broken}:{line}: expected 11 fields, got 2" in r.output for line in range(4, 12))


def test_cli_limit_sizes_a_synthesised_inventory_from_the_jobs_replayed() -> None:
    """Found by review: ``--limit`` reached the replay, not the loader's selection, and the DLRM inventory
    (synthesised from the selected jobs) was that of the whole trace."""
    dlrm = FIXTURES / "alibaba-gpu-2025"

    def nodes(*args: str) -> int:
        r = CliRunner().invoke(_cli(), ["replay", "dlrm2025", "--path", str(dlrm), "--dry-run", *args],
                               env={"COLUMNS": "200"})  # fmt: skip
        assert r.exit_code == 0, r.output
        return int(next(line for line in r.output.splitlines() if "│ nodes " in line).split("│")[2])

    assert nodes("--limit", "3") < nodes()


def test_cli_a_selection_that_keeps_no_job_exits_1() -> None:
    """Found by review: a window past the trace's end published the nodes, no job, and exited 0."""
    r = CliRunner().invoke(_cli(), ["replay", "openb", "--path", str(OPENB), "--dry-run", "--start-offset", "1e9"],
                           env={"COLUMNS": "200"})  # fmt: skip
    assert r.exit_code == 1 and "jobs is in the selection" in r.output and "outside_window" in r.output, r.output


def test_cli_prints_a_kafka_error_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: the error went out as rich markup, and one with "[/…]" raised a MarkupError."""
    import ops.cli.replay as cli

    async def refused(*args: object, **kw: object) -> ReplayStats:
        raise ConnectionRefusedError(111, "Connect call failed [/127.0.0.1:9]")

    monkeypatch.setattr(cli, "run_replay", refused)
    r = CliRunner().invoke(_cli(), ["replay", "jsonl", "--path", str(JSONL), "--bootstrap", "127.0.0.1:9"],
                           env={"COLUMNS": "200"})  # fmt: skip
    assert r.exit_code == 2, repr(r.exception)
    assert "Kafka error at 127.0.0.1:9: ConnectionRefusedError: [Errno 111] Connect call failed [/127.0.0.1:9]" in r.output


def test_cli_option_parsing() -> None:
    assert parse_options(["node_list=all", "include-unscheduled=false", "hn_nodes=4"]) == {
        "node_list": "all", "include_unscheduled": False, "hn_nodes": 4}  # fmt: skip
    assert parse_sample("300") == 300 and parse_sample("0.1") == 0.1 and parse_sample(None) is None
    assert parse_sample("1e3") == 1000 and isinstance(parse_sample("1e3"), int)  # a count (a fraction > 1 before)
    assert parse_sample("1.0") == 1.0  # all of them
    with pytest.raises(typer.BadParameter):
        parse_options(["nonsense"])
    r = CliRunner().invoke(_cli(), ["replay", "nope", "--dry-run"])
    assert r.exit_code == 2 and "unknown trace" in r.output
    # a selection the command has its own flag for (found by review: "got multiple values for keyword argument")
    r = CliRunner().invoke(_cli(), ["replay", "openb", "-o", "sample=0.5", "--dry-run"])
    assert r.exit_code == 2 and "set sample with --sample" in r.output


# ----------------------------------------------------------------------------- Kafka


async def _consume(
    settings: Settings, topic: str, n: int, timeout: float = 30.0
) -> list[tuple[int, bytes, bytes]]:
    consumer = AIOKafkaConsumer(settings.topic(topic), bootstrap_servers=settings.bootstrap,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                group_id=None)  # fmt: skip
    await consumer.start()
    out: list[tuple[int, bytes, bytes]] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < n and loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for msgs in batch.values():
                out.extend((m.partition, m.key, m.value) for m in msgs)
        # anything beyond n would be a duplicate: give it a moment to show up
        extra = await consumer.getmany(timeout_ms=1000)
        for msgs in extra.values():
            out.extend((m.partition, m.key, m.value) for m in msgs)
    finally:
        await consumer.stop()
    return out


@pytest.mark.integration
async def test_replay_into_kafka_and_consume_back(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(
        bootstrap=kafka_broker.bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:10]}.", partitions=4
    )
    loader = get_loader("openb", OPENB)
    stats = await replay(loader, settings, speed=0, limit=None, strict=True, progress=False)
    assert (stats.nodes, stats.jobs, stats.skipped_lines) == (50, 54, 0)

    nodes = await _consume(settings, "nodes.telemetry", 50)
    jobs = await _consume(settings, "jobs.submitted", 54)
    assert len(nodes) == 50 and len(jobs) == 54  # exactly: nothing lost, nothing doubled
    from scheduling.events import partition_for

    part = partition_for("openb", 4)
    assert {p for p, _, _ in nodes + jobs} == {part}  # partitioned by cluster
    got_jobs = [JobSubmitted.model_validate_json(v) for _, _, v in jobs]
    assert [k.decode() for _, k, _ in jobs] == [e.job_id for e in got_jobs]
    want = list(loader.jobs())
    assert [e.job_id for e in got_jobs] == [j.event.job_id for j in want]  # one partition: submit order
    source = replay_source(loader)
    for got, j in zip(got_jobs, want, strict=True):  # the trace's job, published now under its replay id
        assert got.model_dump(exclude={"event_time", "event_id"}) == j.event.model_dump(exclude={"event_time", "event_id"})
        assert got.event_id == replay_event_id(source, j.event)
    got_nodes = [NodeTelemetry.model_validate_json(v) for _, _, v in nodes]
    assert [n.model_dump(exclude={"event_time"}) for n in got_nodes] == [
        n.model_dump(exclude={"event_time"}) for n in loader.nodes()
    ]
    assert all(json.loads(v)["source"] == "inventory" for _, _, v in nodes)


@pytest.mark.integration
async def test_replay_pacing_against_kafka(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(
        bootstrap=kafka_broker.bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:10]}.", partitions=4
    )
    stats = await replay(
        get_loader("jsonl", JSONL), settings, speed=20.0, limit=None, strict=False, progress=False
    )
    assert stats.jobs == 4 and stats.wall_s >= 30 / 20 - 0.05
    jobs = [JobSubmitted.model_validate_json(v) for _, _, v in await _consume(settings, "jobs.submitted", 4)]
    times = {e.job_id: e.event_time for e in jobs}
    assert (times["b"] - times["a"]).total_seconds() == pytest.approx(1.5, abs=0.25)
    assert (times["c"] - times["a"]).total_seconds() == pytest.approx(0.275, abs=0.2)


@pytest.mark.integration
def test_cli_exits_2_naming_what_the_broker_refused(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    # jobs.submitted takes records of 200 bytes at most: every submission is refused by the broker
    # (the nodes go through); the replay must say so and fail, not report a replay that never landed
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    prefix = f"t{uuid.uuid4().hex[:10]}."

    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(f"{prefix}jobs.submitted", num_partitions=4, replication_factor=1,
                                                topic_configs={"max.message.bytes": "200"})])  # fmt: skip
        finally:
            await admin.close()

    asyncio.run(create())
    r = CliRunner().invoke(_cli(), ["replay", "openb", "--path", str(OPENB), "--speed", "0", "--no-progress",
                                    "--bootstrap", kafka_broker.bootstrap, "--topic-prefix", prefix],
                           env={"COLUMNS": "200", "SEMSCHED_PARTITIONS": "4"})  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "Kafka refused events" in r.output and "MessageSizeTooLarge" in r.output, r.output
    assert f"{prefix}jobs.submitted" in r.output
