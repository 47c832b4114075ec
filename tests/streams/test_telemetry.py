"""W3C trace context in Kafka headers: inject / extract round trips, and a missing or garbage
header gives a new root trace, never an exception."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import TraceState

from streams import telemetry


@pytest.fixture
def tracer() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    provider.shutdown()


def test_inject_extract_round_trip_in_aiokafka_and_faust_forms(tracer) -> None:
    t, _ = tracer
    with t.start_as_current_span("send") as span:
        headers = telemetry.inject(span)
    assert [k for k, _ in headers] == ["traceparent"]
    assert all(isinstance(k, str) and isinstance(v, bytes) for k, v in headers)  # what aiokafka takes
    sent = span.get_span_context()
    for form in (headers, tuple(headers), dict(headers)):  # aiokafka record, Faust event.headers
        got = telemetry.span_context(form)
        assert got is not None and got.is_remote
        assert (got.trace_id, got.span_id, got.trace_flags) == (sent.trace_id, sent.span_id, sent.trace_flags)
    # a child started from the extracted context continues the trace
    child = t.start_span("process", context=telemetry.extract(headers))
    assert child.get_span_context().trace_id == sent.trace_id
    assert child.parent is not None and child.parent.span_id == sent.span_id


def test_inject_defaults_to_the_current_span_and_keeps_tracestate(tracer) -> None:
    t, _ = tracer
    assert telemetry.inject() == []  # no span: nothing to carry
    with t.start_as_current_span("outer") as outer:
        headers = dict(telemetry.inject())
    assert headers["traceparent"].decode().split("-")[2] == format(outer.get_span_context().span_id, "016x")
    remote = trace.SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=True,
                               trace_flags=trace.TraceFlags(1), trace_state=TraceState([("vendor", "v1")]))  # fmt: skip
    hs = dict(telemetry.inject(remote))
    assert hs["tracestate"] == b"vendor=v1"
    got = telemetry.span_context(list(hs.items()))
    assert got is not None and got.trace_state.get("vendor") == "v1" and got.trace_id == 0x1234


GARBAGE = [
    None, [], {}, (), 42, "traceparent", b"traceparent",
    [("traceparent", b"")],
    [("traceparent", b"\xff\xfe\x00 not ascii")],
    [("traceparent", b"00-zzzz-yyyy-01")],
    [("traceparent", b"00-" + b"0" * 32 + b"-" + b"1" * 16 + b"-01")],  # all-zero trace id
    [("traceparent", b"00-" + b"a" * 32 + b"-" + b"0" * 16 + b"-01")],  # all-zero span id
    [("traceparent", b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-01" + b"x" * 600)],  # too long
    [("traceparent", None)], [("traceparent", 17)], [(b"traceparent", b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-01")],
    [("traceparent",)], [None], ["traceparent"], {"traceparent": object()},
]  # fmt: skip


@pytest.mark.parametrize("headers", GARBAGE, ids=range(len(GARBAGE)))
def test_missing_or_garbage_header_gives_a_new_root_trace(tracer, headers) -> None:
    t, exporter = tracer
    assert telemetry.span_context(headers) is None
    assert not telemetry.has_context(headers)
    with t.start_as_current_span("process", context=telemetry.extract(headers)):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is None and span.context.is_valid


def test_other_headers_are_ignored_and_case_does_not_matter(tracer) -> None:
    t, _ = tracer
    with t.start_as_current_span("send") as span:
        (_, value), = telemetry.inject(span)
    headers = [("content-type", b"application/json"), ("TraceParent", value), ("x", b"\xff")]
    got = telemetry.span_context(headers)
    assert got is not None and got.span_id == span.get_span_context().span_id


def test_telemetry_off_still_passes_the_context_on() -> None:
    """SEMSCHED_OTEL_EXPORTER=none: no spans are recorded, but a message's context survives a
    hop through the process (the no-op span of a received context is that context)."""
    telemetry.shutdown()
    remote = trace.SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=trace.TraceFlags(1))
    incoming = telemetry.inject(remote)
    span = telemetry.tracer().start_span("process", context=telemetry.extract(incoming))
    assert not span.is_recording()
    assert telemetry.inject(span) == incoming


def test_a_cluster_whose_queue_emptied_reads_0_for_a_while_then_its_series_goes() -> None:
    """(Found by review: every cluster name a producer ever sent stayed a series for good.)"""
    from streams.telemetry.metrics import EMPTY_KEPT_S, QueueSnapshot

    q = QueueSnapshot()
    q.update({"a": 3, "b": 1}, {}, now=0.0)
    q.update({"a": 2}, {}, now=10.0)
    assert q.depth == {"a": 2, "b": 0}  # b emptied: 0, not gone
    q.update({"a": 1, "c": 0}, {}, now=11.0 + EMPTY_KEPT_S)
    assert q.depth == {"a": 1, "c": 0}  # b gone after EMPTY_KEPT_S
