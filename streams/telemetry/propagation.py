"""W3C trace context in Kafka message headers (``traceparent``, ``tracestate``).

aiokafka hands headers over as a sequence of ``(str, bytes)`` pairs and takes a list of them
when producing; Faust's ``event.headers`` is a ``dict[str, bytes]`` built from the same pairs
(``event.message.headers`` keeps the raw sequence), and its producer accepts either form.
:func:`inject` writes the pairs; :func:`extract` reads any of these forms. A missing, garbled
or wrongly typed header yields an empty :class:`Context`, so a span started from it is a new
root trace: reading headers never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Span, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger("semsched.telemetry")

TRACEPARENT = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()
Headers = list[tuple[str, bytes]]


def _text(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("ascii", errors="replace")
    return value if isinstance(value, str) else None


def _pairs(headers: Any) -> dict[str, str]:
    """The trace-context headers as text, from a Faust dict or an aiokafka sequence of pairs."""
    if not headers:
        return {}
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2 or not isinstance(item[0], str):
            continue
        key = item[0].lower()
        if key in _PROPAGATOR.fields and (text := _text(item[1])) is not None:
            out[key] = text
    return out


class _DictGetter(Getter[dict[str, str]]):
    def get(self, carrier: dict[str, str], key: str) -> list[str] | None:
        v = carrier.get(key)
        return None if v is None else [v]

    def keys(self, carrier: dict[str, str]) -> list[str]:
        return list(carrier)


_GETTER = _DictGetter()


def extract(headers: Any) -> Context:
    """The trace context on a message (empty when there is none or it is garbage)."""
    try:
        pairs = _pairs(headers)
        return _PROPAGATOR.extract(pairs, getter=_GETTER) if TRACEPARENT in pairs else Context()
    except Exception as e:  # noqa: BLE001 - never let a header break ingest
        log.debug("unreadable trace context %r: %s", headers, e)
        return Context()


def span_context(headers: Any) -> SpanContext | None:
    """The sender's span context (for a link), or None."""
    ctx = trace.get_current_span(extract(headers)).get_span_context()
    return ctx if ctx.is_valid else None


def has_context(headers: Any) -> bool:
    return span_context(headers) is not None


def context_of(span_or_ctx: Span | SpanContext | Context | None) -> Context:
    """A :class:`Context` whose current span is ``span_or_ctx`` (a parent for a new span)."""
    if span_or_ctx is None:
        return Context()
    if isinstance(span_or_ctx, SpanContext):
        return trace.set_span_in_context(trace.NonRecordingSpan(span_or_ctx), Context())
    if isinstance(span_or_ctx, Span):
        return trace.set_span_in_context(span_or_ctx, Context())
    return span_or_ctx


def inject(span_or_ctx: Span | SpanContext | Context | None = None) -> Headers:
    """Kafka headers carrying ``span_or_ctx`` (default: the current context); ``[]`` when it
    holds no valid span (telemetry off and nothing to pass on)."""
    ctx = None if span_or_ctx is None else context_of(span_or_ctx)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return []
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=ctx)
    return [(k, v.encode("ascii")) for k, v in carrier.items()]
