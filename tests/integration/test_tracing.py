"""One job's spans link up across processes (real broker, worker and agents subprocesses):
submission (this process) → ingest → schedule job → agent execution → lifecycle reports, all
in the job's trace; the scheduling step and the archive writes are their own traces, linked
to it. Every process exports JSON lines (``SEMSCHED_OTEL_EXPORTER=file:DIR``)."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from scheduling.events import JobSubmitted, NodeTelemetry
from streams import telemetry
from streams.topics import ensure_topics
from tests.integration.conftest import publish

pytestmark = pytest.mark.integration

JOBS = ("t-0", "t-1", "t-2", "t-3")


def _read(out: Path, kind: str) -> list[dict[str, Any]]:
    rows = []
    for f in sorted(out.glob(f"*.{kind}.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return rows


def test_spans_of_one_job_link_up_across_processes(make_stack, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "otel"
    # inherited by the worker and agents subprocesses; short export intervals for the test
    monkeypatch.setenv("SEMSCHED_OTEL_EXPORTER", f"file:{out}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "1000")
    p = make_stack()
    assert p.settings.otel_exporter == f"file:{out}"
    telemetry.configure(p.settings, "test-producer")
    try:
        asyncio.run(ensure_topics(p.settings))
        p.start_worker()
        p.start_agents("--speed", "1", "--telemetry", "1")
        node = NodeTelemetry(node_id="n1", source="inventory", cpu_milli=8000, memory_mib=16384, num_gpu=1,
                             gpu_model="T4")  # fmt: skip
        jobs = [JobSubmitted(job_id=j, cpu_milli=1000, trace_duration_s=0.3) for j in JOBS]
        huge = JobSubmitted(job_id="t-huge", cpu_milli=1000, num_gpu=8)  # never fits: rejected
        publish(p.settings, [node, *jobs, huge])
        p.wait(lambda s: s["finished"] == len(JOBS) and s["rejected"] == 1, timeout=120, what="jobs to settle")
        n = p.scalar("SELECT count() FROM jobs_lifecycle FINAL WHERE state = 'finished'")  # flushes the archiver
        assert n == len(JOBS)
    finally:
        telemetry.shutdown()
        p.stop()  # SIGTERM: the worker and agents export what they buffered on the way out

    spans = _read(out, "spans")
    by_id = {s["context"]["span_id"]: s for s in spans}
    services = {s["resource"]["attributes"]["service.name"] for s in spans}
    assert {"test-producer", "semsched-worker", "semsched-agents"} <= services
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in spans:
        by_trace[s["context"]["trace_id"]].append(s)

    def parent_of(s: dict[str, Any]) -> dict[str, Any]:
        assert s["parent_id"] is not None, f"{s['name']} has no parent"
        return by_id[s["parent_id"]]

    archive_links = defaultdict(set)  # trace id → span ids the archive writes link to
    for s in spans:
        if s["name"] == "archive write":
            assert s["parent_id"] is None
            for link in s["links"]:
                archive_links[link["context"]["trace_id"]].add(link["context"]["span_id"])

    for job in JOBS:
        (send,) = [s for s in spans if s["name"] == "send jobs.submitted" and s["attributes"]["semsched.job_id"] == job]
        assert send["parent_id"] is None and send["kind"] == "SpanKind.PRODUCER"
        trace = {s["name"]: s for s in by_trace[send["context"]["trace_id"]]}
        ingest, decide, execute = trace["process jobs.submitted"], trace["schedule job"], trace["execute job"]
        assert parent_of(ingest) is send and ingest["attributes"]["semsched.job_id"] == job
        assert parent_of(decide) is ingest and decide["attributes"]["semsched.outcome"] == "placed"
        assert [e["name"] for e in decide["events"]] == ["decision acknowledged"]
        assert parent_of(execute) is decide
        assert execute["resource"]["attributes"]["service.name"] == "semsched-agents"
        assert execute["attributes"]["semsched.state"] == "finished" and execute["status"]["status_code"] == "UNSET"
        assert [e["name"] for e in execute["events"]] == ["started"]
        reports = [s for s in by_trace[send["context"]["trace_id"]] if s["name"] == "process jobs.lifecycle"]
        assert sorted(r["attributes"]["semsched.state"] for r in reports) == ["finished", "started"]
        assert all(parent_of(r) is execute for r in reports)
        # times make sense: submitted before ingested before decided before executed
        assert send["start_time"] <= ingest["start_time"] <= execute["start_time"]
        assert decide["end_time"] <= execute["end_time"]
        # the scheduling step is linked, the archive writes link back to every hop
        (step_link,) = decide["links"]
        step = by_id[step_link["context"]["span_id"]]
        assert step["name"] == "schedule step" and step["parent_id"] is None
        assert step["attributes"]["semsched.decided"] >= 1
        hops = {send["context"]["span_id"], decide["context"]["span_id"], execute["context"]["span_id"]}
        assert hops <= archive_links[send["context"]["trace_id"]], job

    (send,) = [s for s in spans if s["name"] == "send jobs.submitted" and s["attributes"]["semsched.job_id"] == "t-huge"]
    trace = {s["name"]: s for s in by_trace[send["context"]["trace_id"]]}
    assert trace["schedule job"]["attributes"]["semsched.outcome"] == "rejected"
    assert "execute job" not in trace

    # metrics of the worker: decision latency per decided job, queue and archive gauges
    names: dict[str, list[Any]] = defaultdict(list)
    for batch in _read(out, "metrics"):
        for rm in batch["resource_metrics"]:
            if rm["resource"]["attributes"]["service.name"] != "semsched-worker":
                continue
            for sm in rm["scope_metrics"]:
                for m in sm["metrics"]:
                    names[m["name"]].extend(m["data"]["data_points"])
    latency = names["semsched.decision.latency"]
    # cumulative: the last export holds every decision
    assert max(dp["count"] for dp in latency if dp["attributes"]["outcome"] == "placed") == len(JOBS)
    assert {"semsched.queue.depth", "semsched.queue.oldest_age", "semsched.archive.lag"} <= set(names)
    assert {dp["attributes"]["stage"] for dp in names["semsched.archive.lag"]} == {"buffered", "unconsumed"}
