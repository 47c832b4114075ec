"""Where this process's spans and metrics go: ``SEMSCHED_OTEL_EXPORTER`` (``Settings.otel_exporter``).

=============  ==============================================================================
``console``    the default: one compact JSON line per span and per metric export, for one job
               trace in a hundred (``CONSOLE_TRACE_RATIO``, parent-based: a job's spans in every
               process are kept or dropped together) unless ``OTEL_TRACES_SAMPLER`` says
               otherwise (``parentbased_always_on``: all). Writing every span cost the demo's
               worker most of its throughput: at openb's 250 pods a second, decision latency
               p50 6.6–10.5 s against 1.35 s sampled and 1.29 s without telemetry. A service
               (``semsched worker``, ``semsched agents``) run in a terminal prints them there;
               one whose stdout is not a terminal (the demo's, benches' and tests' workers and
               agents, whose stdout is their log file) writes them beside it, to
               ``<state dir>/telemetry/<service>-<pid>.jsonl``, so that the log stays readable
               and the demo's failure report shows errors, not spans. A process that only
               publishes (``semsched replay``, the demo, benches, tests: the producer sets
               telemetry up itself) writes them to ``<state dir>/telemetry/<service>.jsonl`` so
               they never cover a terminal or a progress bar.
``otlp``       OTLP to a collector: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default
               ``http://localhost:4318``), ``OTEL_EXPORTER_OTLP_PROTOCOL`` ``http/protobuf``
               (default) or ``grpc``. Needs ``opentelemetry-exporter-otlp-proto-http`` (or
               ``-grpc``); without it the process stops with a message that says so.
``none``       nothing is recorded; trace context already on a message is still passed on.
``file:DIR``   JSON lines under ``DIR``: ``<service>-<pid>.spans.jsonl`` and ``.metrics.jsonl``,
               one file per process (how the integration test collects spans across processes).
=============  ==============================================================================

The standard ``OTEL_*`` variables keep their meaning: ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` (e.g. ``parentbased_traceidratio`` with
``OTEL_TRACES_SAMPLER_ARG=0.01`` keeps one job trace in a hundred), ``OTEL_BSP_*`` (the batch
span processor), ``OTEL_METRIC_EXPORT_INTERVAL`` (ms, default 60000),
``OTEL_SPAN_LINK_COUNT_LIMIT`` (links per span; default 1024 here, for the archiver's batches).

Spans always go through a :class:`BatchSpanProcessor` (a background thread exports them).
The tracer and the meter are kept here, not in OpenTelemetry's global providers, so that a
test can replace them (:func:`install`) and :func:`shutdown` returns to the no-op state.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opentelemetry import metrics, trace

from streams.settings import Settings

log = logging.getLogger("semsched.telemetry")

CONSOLE_TRACE_RATIO = 0.01  # job traces the console exporter keeps without OTEL_TRACES_SAMPLER
OTLP_PACKAGES = {"http/protobuf": "opentelemetry-exporter-otlp-proto-http",
                 "grpc": "opentelemetry-exporter-otlp-proto-grpc"}  # fmt: skip


class TelemetryConfigError(RuntimeError):
    """The exporter setting cannot be honoured (unknown value, OTLP exporter not installed)."""


@dataclass
class _State:
    tracer: trace.Tracer
    meter: metrics.Meter
    exporter: str = "none"
    service: str | None = None
    tracer_provider: Any = None
    meter_provider: Any = None
    files: tuple[IO[str], ...] = ()


_state = _State(tracer=trace.NoOpTracer(), meter=metrics.NoOpMeter("semsched"))
_listeners: list[Any] = []  # called with the new meter after every (re)configuration


def tracer() -> trace.Tracer:
    return _state.tracer


def meter() -> metrics.Meter:
    return _state.meter


def configured() -> str | None:
    """The service name this process's telemetry was set up for, or None."""
    return _state.service


def on_meter(listener: Any) -> None:
    """``listener(meter)`` now and after every reconfiguration (instruments live on a meter)."""
    _listeners.append(listener)
    listener(_state.meter)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _compact_span(span: Any) -> str:
    return span.to_json(indent=None) + "\n"


def _compact_metrics(data: Any) -> str:
    return data.to_json(indent=None) + "\n"


def _otlp_exporters() -> tuple[Any, Any]:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip() or "http/protobuf"
    if protocol not in OTLP_PACKAGES:
        raise TelemetryConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: expected http/protobuf or grpc")
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as e:
        raise TelemetryConfigError(
            f"SEMSCHED_OTEL_EXPORTER=otlp ({protocol}) needs the OTLP exporter package, which is not "
            f"installed ({e}): pip install {OTLP_PACKAGES[protocol]} — or choose SEMSCHED_OTEL_EXPORTER="
            "console, none or file:DIR"
        ) from None
    return OTLPSpanExporter(), OTLPMetricExporter()


def _exporters(choice: str, service: str, console_file: Path | None) -> tuple[Any, Any, tuple[IO[str], ...]]:
    """(span exporter, metric exporter, files to close) for a ``SEMSCHED_OTEL_EXPORTER`` value."""
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    if choice == "otlp":
        spans, metric = _otlp_exporters()
        return spans, metric, ()
    if choice == "console" and console_file is None:
        out: IO[str] = sys.stdout
        return (ConsoleSpanExporter(out=out, formatter=_compact_span),
                ConsoleMetricExporter(out=out, formatter=_compact_metrics), ())  # fmt: skip
    if choice == "console":
        assert console_file is not None
        console_file.parent.mkdir(parents=True, exist_ok=True)
        f = open(console_file, "a", buffering=1)  # noqa: SIM115 - closed by shutdown()
        return (ConsoleSpanExporter(out=f, formatter=_compact_span),
                ConsoleMetricExporter(out=f, formatter=_compact_metrics), (f,))  # fmt: skip
    if choice.startswith("file:") and choice[5:].strip():
        d = Path(choice[5:].strip()).expanduser()
        d.mkdir(parents=True, exist_ok=True)
        stem = d / f"{service}-{os.getpid()}"
        fs = open(f"{stem}.spans.jsonl", "a", buffering=1)  # noqa: SIM115
        fm = open(f"{stem}.metrics.jsonl", "a", buffering=1)  # noqa: SIM115
        return (ConsoleSpanExporter(out=fs, formatter=_compact_span),
                ConsoleMetricExporter(out=fm, formatter=_compact_metrics), (fs, fm))  # fmt: skip
    raise TelemetryConfigError(f"SEMSCHED_OTEL_EXPORTER={choice!r}: expected console, otlp, none or file:DIR")


def configure(settings: Settings, service: str, *, console_file: Path | None = None) -> str:
    """Set this process's telemetry up from ``settings.otel_exporter`` (replacing an earlier
    set-up). ``console_file``: where ``console`` writes (default: stdout if it is a terminal,
    else ``<state dir>/telemetry/<service>-<pid>.jsonl``). Returns a one-line description;
    raises :class:`TelemetryConfigError` for a setting it cannot honour."""
    choice = (settings.otel_exporter or "none").strip()
    if choice == "console" and console_file is None and not _is_terminal(sys.stdout):
        console_file = settings.state_dir / "telemetry" / f"{service}-{os.getpid()}.jsonl"
    if choice.lower() in ("none", "off", ""):
        shutdown()
        return "telemetry off (SEMSCHED_OTEL_EXPORTER=none)"
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    try:  # (found by review: an unwritable file: directory, or a link limit that is not a number, was a traceback)
        links = int(os.environ.get("OTEL_SPAN_LINK_COUNT_LIMIT", "1024"))
    except ValueError:
        raise TelemetryConfigError(f"OTEL_SPAN_LINK_COUNT_LIMIT must be an integer, not "
                                   f"{os.environ.get('OTEL_SPAN_LINK_COUNT_LIMIT')!r}") from None  # fmt: skip
    try:
        span_exporter, metric_exporter, files = _exporters(choice, service, console_file)
    except OSError as e:
        raise TelemetryConfigError(f"SEMSCHED_OTEL_EXPORTER={choice!r}: cannot write there: {e}") from e
    name = os.environ.get("OTEL_SERVICE_NAME") or service
    resource = Resource.create({SERVICE_NAME: name, "service.namespace": "semsched",
                                "service.instance.id": f"{os.uname().nodename}-{os.getpid()}"})  # fmt: skip
    sampler = None  # the SDK's default, or OTEL_TRACES_SAMPLER
    sampled = ""
    if choice == "console" and not os.environ.get("OTEL_TRACES_SAMPLER"):
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        sampler = ParentBased(TraceIdRatioBased(CONSOLE_TRACE_RATIO))
        sampled = f", traces sampled at {CONSOLE_TRACE_RATIO:g}"
    tp = TracerProvider(resource=resource, span_limits=SpanLimits(max_links=links), shutdown_on_exit=True,
                        sampler=sampler)  # fmt: skip
    tp.add_span_processor(BatchSpanProcessor(span_exporter))
    mp = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(metric_exporter)],
                       shutdown_on_exit=True)  # fmt: skip
    install(tp, mp, exporter=choice, service=name, files=files)
    where = f" → {console_file}" if console_file is not None and choice == "console" else ""
    return f"telemetry: {choice}{where} as {name}{sampled}"


def ensure_configured(settings: Settings, service: str) -> None:
    """Set telemetry up for a process that only publishes (replay, demo, bench, tests) unless
    this process already did: ``console`` goes to ``<state dir>/telemetry/<service>.jsonl``.
    A setting it cannot honour (a file that cannot be written) turns telemetry off with a warning
    (publishing goes on)."""
    if _state.service is not None:
        return
    try:
        configure(settings, service, console_file=settings.state_dir / "telemetry" / f"{service}.jsonl")
    except (OSError, TelemetryConfigError) as e:
        log.warning("telemetry off: %s", e)


def install(tracer_provider: Any, meter_provider: Any, *, exporter: str = "custom", service: str = "semsched",
            files: tuple[IO[str], ...] = ()) -> None:  # fmt: skip
    """Use these SDK providers from now on (tests pass in-memory exporters this way)."""
    shutdown()
    _state.tracer = tracer_provider.get_tracer("semsched")
    _state.meter = meter_provider.get_meter("semsched")
    _state.tracer_provider, _state.meter_provider = tracer_provider, meter_provider
    _state.exporter, _state.service, _state.files = exporter, service, files
    for listener in _listeners:
        listener(_state.meter)


def shutdown() -> None:
    """Export what is buffered, stop the exporters, and return to the no-op tracer and meter."""
    tp, mp, files = _state.tracer_provider, _state.meter_provider, _state.files
    _state.tracer, _state.meter = trace.NoOpTracer(), metrics.NoOpMeter("semsched")
    _state.tracer_provider = _state.meter_provider = None
    _state.exporter, _state.service, _state.files = "none", None, ()
    for provider in (tp, mp):
        if provider is not None:
            try:
                provider.shutdown()
            except Exception as e:  # noqa: BLE001 - telemetry must never break a shutdown
                log.warning("telemetry shutdown: %s", e)
    for f in files:
        f.close()
    for listener in _listeners:
        listener(_state.meter)
