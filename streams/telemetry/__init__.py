"""OpenTelemetry for semsched: spans along one job's path with the W3C trace context carried
in Kafka headers, and the control plane's metrics.

- :mod:`streams.telemetry.setup` — where spans and metrics go (``SEMSCHED_OTEL_EXPORTER``)
- :mod:`streams.telemetry.propagation` — ``traceparent`` in Kafka headers (inject / extract)
- :mod:`streams.telemetry.spans` — the spans of the pipeline and how they link up
- :mod:`streams.telemetry.metrics` — decision latency, queue depth and age, dead letters,
  archive lag
"""

from streams.telemetry.metrics import count_deadletter, observe_queue, reason_class, record_decision
from streams.telemetry.propagation import extract, has_context, inject, span_context
from streams.telemetry.setup import (
    TelemetryConfigError,
    configure,
    configured,
    ensure_configured,
    install,
    shutdown,
    tracer,
)
from streams.telemetry.spans import (
    JobTraces,
    StepTrace,
    archive_span,
    consume_span,
    end_execute,
    send_span,
    start_execute,
    step_trace,
)

__all__ = [
    "JobTraces", "StepTrace", "TelemetryConfigError", "archive_span", "configure", "configured",
    "consume_span", "count_deadletter", "end_execute", "ensure_configured", "extract", "has_context",
    "inject", "install", "observe_queue", "reason_class", "record_decision", "send_span", "shutdown",
    "span_context", "start_execute", "step_trace", "tracer",
]  # fmt: skip
