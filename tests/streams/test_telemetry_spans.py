"""The pipeline's spans link up (in-process, with the SDK's in-memory exporter and reader),
the metrics carry what they should, and the exporter setting is honoured or refused clearly."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from streams import telemetry
from streams.settings import Settings
from streams.state import PendingJob
from streams.telemetry.metrics import QUEUE


@pytest.fixture
def otel() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(tp, MeterProvider(metric_readers=[reader]))
    QUEUE.clear()  # (what other tests' steps left: their clusters read 0 for a while)
    yield exporter, reader
    telemetry.shutdown()
    QUEUE.clear()


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


def test_one_job_from_submission_to_agent_and_archive(otel) -> None:
    exporter, reader = otel
    with telemetry.send_span("semsched.jobs.submitted", "j1") as submission:
        pass
    jobs = telemetry.JobTraces()
    with telemetry.consume_span("semsched.jobs.submitted", "jobs.submitted", dict(submission), 0, 7) as ingest:
        jobs.remember("j1", ingest)
    with telemetry.step_trace("c", "best-fit", jobs, pending=2) as st:
        command = st.decide("j1", "d1", outcome="placed", latency_ms=12.0, node_id="n1")
        st.decide("j2", "d2", outcome="rejected", latency_ms=3.0)  # never ingested here: a new root
        st.acknowledged()
    run = telemetry.start_execute("semsched.actions", command, job_id="j1", decision_id="d1", node_id="n1")
    report = telemetry.inject(run)
    telemetry.end_execute(run, "finished")
    with telemetry.consume_span("semsched.jobs.lifecycle", "jobs.lifecycle", report, 0, 1):
        pass
    with telemetry.archive_span("jobs_lifecycle", 1, [telemetry.span_context(report)]):
        pass

    spans = {(s.name, s.attributes.get("semsched.job_id")): s for s in exporter.get_finished_spans()}
    send, proc = spans[("send jobs.submitted", "j1")], spans[("process jobs.submitted", None)]
    decide, other = spans[("schedule job", "j1")], spans[("schedule job", "j2")]
    execute, back = spans[("execute job", "j1")], spans[("process jobs.lifecycle", None)]
    step, archive = spans[("schedule step", None)], spans[("archive write", None)]
    tid = send.context.trace_id
    chain = [send, proc, decide, execute, back]
    assert send.parent is None and send.kind == SpanKind.PRODUCER
    assert all(s.context.trace_id == tid for s in chain)
    for parent, child in zip(chain, chain[1:], strict=False):
        assert child.parent is not None and child.parent.span_id == parent.context.span_id, child.name
    assert execute.status.is_ok and [e.name for e in decide.events] == ["decision acknowledged"]
    # the step and the archive write are their own traces, linked to the jobs
    assert step.parent is None and step.context.trace_id != tid
    assert [link.context.span_id for link in decide.links] == [step.context.span_id]
    assert other.parent is None and other.links[0].context.span_id == step.context.span_id
    assert step.attributes["semsched.decided"] == 2
    assert archive.parent is None and [lk.context.trace_id for lk in archive.links] == [tid]
    assert jobs.get("j1") == proc.context  # a placed job keeps its context (a retry continues the trace)
    hist = {p.attributes["outcome"]: p for p in _points(reader)["semsched.decision.latency"]}
    assert (hist["placed"].count, hist["placed"].sum, hist["rejected"].sum) == (1, 12.0, 3.0)
    assert hist["placed"].attributes["policy"] == "best-fit"


def test_a_failed_step_ends_its_spans_with_an_error(otel) -> None:
    exporter, _ = otel
    with pytest.raises(RuntimeError), telemetry.step_trace("c", "p", telemetry.JobTraces(), 1) as st:
        st.decide("j", "d", outcome="placed", latency_ms=1.0)
        raise RuntimeError("broker gone")
    names = {s.name: s for s in exporter.get_finished_spans()}
    assert not names["schedule step"].status.is_ok and not names["schedule job"].status.is_ok


def test_a_rejected_job_is_forgotten(otel) -> None:
    jobs = telemetry.JobTraces(capacity=2)
    with telemetry.consume_span("t", "jobs.submitted", None, 0, 0) as ingest:
        for j in ("a", "b", "c"):
            jobs.remember(j, ingest)
    assert len(jobs) == 2 and jobs.get("a") is None  # bounded: oldest out
    with telemetry.step_trace("c", "p", jobs, 1) as st:
        st.decide("b", "d", outcome="rejected", latency_ms=1.0)
    assert jobs.get("b") is None and jobs.get("c") is not None


def test_queue_gauges_and_deadletter_classes(otel) -> None:
    _, reader = otel
    job = {"job_id": "a", "cluster": "c", "cpu_milli": 1000, "memory_mib": 10, "event_time": "2026-01-01T00:00:00Z"}
    from scheduling.events import JobSubmitted

    ev = JobSubmitted.model_validate(job)
    p_old = PendingJob(job=ev, submit_ts=100.0, queued_ts=100.0)
    p_retry = PendingJob(job=ev, attempt=1, submit_ts=50.0, queued_ts=200.0)  # a retry: age from re-queue
    telemetry.observe_queue({"c": [(p_old, None), (p_retry, None)], "d": [(p_retry, None)]})
    telemetry.count_deadletter("invalid jobs.submitted event: x", topic="jobs.submitted", source="worker")
    telemetry.count_deadletter("message of 9 bytes exceeds the 1-byte limit", topic="jobs.submitted", source="worker")
    pts = _points(reader)
    depth = {p.attributes["cluster"]: p.value for p in pts["semsched.queue.depth"]}
    ages = {p.attributes["cluster"]: p.value for p in pts["semsched.queue.oldest_age"]}
    assert depth == {"c": 2, "d": 1}
    assert ages["c"] - ages["d"] == pytest.approx(100.0, abs=1.0)
    dead = {p.attributes["reason_class"]: p.value for p in pts["semsched.deadletters"]}
    assert dead == {"invalid": 1, "oversized": 1}
    telemetry.observe_queue({})  # queues emptied: 0, not gone
    depth = {p.attributes["cluster"]: p.value for p in _points(reader)["semsched.queue.depth"]}
    assert depth == {"c": 0, "d": 0}


@pytest.mark.parametrize(("reason", "cls"), [
    ("empty message (null value)", "empty"), ("not UTF-8: 'utf-8' codec", "not_utf8"),
    ("event of cluster 'x' arrived on partition 1, but", "wrong_partition"),
    ("internal error while handling: KeyError", "internal_error"),
    ("job id 'a' was already submitted (event e)", "duplicate"), ("invalid actions command: bad", "invalid"),
    ("something new", "other"),
])  # fmt: skip
def test_reason_class(reason: str, cls: str) -> None:
    assert telemetry.reason_class(reason) == cls


def test_archive_gauges_read_the_archivers(otel, tmp_path: Path) -> None:
    from streams.archiver import Archiver
    from streams.telemetry.metrics import ARCHIVES

    _, reader = otel
    ARCHIVES.clear()  # archivers other tests left alive would count too (the gauge sums them all)
    a = Archiver(Settings(state_dir=tmp_path))
    a.stats.lag = {"t:0": 5, "t:1": 2}
    pts = _points(reader)
    lag = {p.attributes["stage"]: p.value for p in pts["semsched.archive.lag"]}
    assert lag == {"unconsumed": 7, "buffered": 0}
    assert [p.value for p in pts["semsched.archive.lag_seconds"]] == [0.0]


def _settings(tmp_path: Path, exporter: str) -> Settings:
    return Settings(state_dir=tmp_path, otel_exporter=exporter)


def test_file_exporter_writes_json_lines_per_process(tmp_path: Path) -> None:
    out = tmp_path / "otel"
    try:
        assert "file:" in telemetry.configure(_settings(tmp_path, f"file:{out}"), "svc")
        with telemetry.send_span("t", "j9"):
            pass
        telemetry.record_decision(5.0, policy="p", outcome="placed")
    finally:
        telemetry.shutdown()
    spans = [json.loads(line) for line in (out / f"svc-{os.getpid()}.spans.jsonl").read_text().splitlines()]
    assert [(s["name"], s["attributes"]["semsched.job_id"], s["resource"]["attributes"]["service.name"])
            for s in spans] == [("send jobs.submitted", "j9", "svc")]  # fmt: skip
    metrics = (out / f"svc-{os.getpid()}.metrics.jsonl").read_text()
    assert "semsched.decision.latency" in metrics


def test_console_of_a_publishing_process_goes_to_the_state_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")  # every trace (default: 1 in 100)
    try:
        telemetry.ensure_configured(_settings(tmp_path, "console"), "pub")
        assert telemetry.configured() == "pub"
        telemetry.ensure_configured(_settings(tmp_path / "other", "console"), "again")  # first one wins
        with telemetry.send_span("t", "j1"):
            pass
    finally:
        telemetry.shutdown()
    lines = (tmp_path / "telemetry" / "pub.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["name"] == "send jobs.submitted"
    assert telemetry.configured() is None


def test_unknown_exporter_and_missing_otlp_package_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(telemetry.TelemetryConfigError, match="expected console, otlp, none or file:DIR"):
        telemetry.configure(_settings(tmp_path, "jaeger"), "svc")
    assert "off" in telemetry.configure(_settings(tmp_path, "none"), "svc") and telemetry.configured() is None
    try:
        installed = importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
    except ModuleNotFoundError:
        installed = False
    if not installed:
        with pytest.raises(telemetry.TelemetryConfigError, match="pip install opentelemetry-exporter-otlp-proto-http"):
            telemetry.configure(_settings(tmp_path, "otlp"), "svc")
    else:
        try:
            assert "otlp" in telemetry.configure(_settings(tmp_path, "otlp"), "svc")
        finally:
            telemetry.shutdown()


def test_an_unwritable_exporter_directory_or_a_bad_link_limit_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    """(Found by review: an OSError and a ValueError, past the worker's one-line handler: tracebacks.)"""
    (tmp_path / "a-file").write_text("")
    with pytest.raises(telemetry.TelemetryConfigError, match="cannot write there"):
        telemetry.configure(_settings(tmp_path, f"file:{tmp_path / 'a-file' / 'spans'}"), "svc")
    monkeypatch.setenv("OTEL_SPAN_LINK_COUNT_LIMIT", "abc")
    with pytest.raises(telemetry.TelemetryConfigError, match="OTEL_SPAN_LINK_COUNT_LIMIT must be an integer"):
        telemetry.configure(_settings(tmp_path, "console"), "svc")
    assert telemetry.configured() is None


def test_console_of_a_service_without_a_terminal_goes_beside_its_log(tmp_path: Path, capsys, monkeypatch) -> None:
    """The local stack's worker writes its log to a file: its spans must not bury that log."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    try:
        where = telemetry.configure(_settings(tmp_path, "console"), "svc")  # pytest's stdout is no terminal
        with telemetry.send_span("t", "j1"):
            pass
    finally:
        telemetry.shutdown()
    path = tmp_path / "telemetry" / f"svc-{os.getpid()}.jsonl"
    assert str(path) in where
    assert json.loads(path.read_text().splitlines()[0])["name"] == "send jobs.submitted"
    assert "send jobs.submitted" not in capsys.readouterr().out


def test_console_keeps_one_job_trace_in_a_hundred_unless_the_sampler_is_set(tmp_path: Path, monkeypatch) -> None:
    """Writing every span to the console cost the demo's worker most of its throughput. A job's
    spans are kept or dropped together (parent-based): the child of a kept span is kept."""
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    try:
        assert "sampled at 0.01" in telemetry.configure(_settings(tmp_path, "console"), "svc")
        for i in range(3000):
            with telemetry.send_span("t", f"j{i}"):
                pass
    finally:
        telemetry.shutdown()
    kept = (tmp_path / "telemetry" / f"svc-{os.getpid()}.jsonl").read_text().count("send jobs.submitted")
    assert 5 <= kept <= 80, kept  # binomial(3000, 0.01): 30 expected
