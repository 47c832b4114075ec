"""Trace loaders: real cluster traces → the canonical events (``JobSubmitted``,
``NodeTelemetry``) with submit offsets, for replay, tests, training and benchmarks.

``get_loader(name, path=None, **opts)`` → a :class:`TraceLoader` with ``nodes()`` and
``jobs()`` (``TraceJob(offset_s, event)`` sorted by offset), ``errors`` and ``stats``.
"""

from ops.traces.base import LoadStats, Selection, TraceFormatError, TraceJob, TraceLineError, TraceLoader
from ops.traces.registry import LOADERS, TraceInfo, available_traces, get_loader

__all__ = [
    "LOADERS",
    "LoadStats",
    "Selection",
    "TraceFormatError",
    "TraceInfo",
    "TraceJob",
    "TraceLineError",
    "TraceLoader",
    "available_traces",
    "get_loader",
]
