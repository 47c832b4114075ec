"""A file of canonical events, one JSON object per line — the format for producers that
are not a known trace (and what :func:`write_jsonl` exports any loader to).

Each non-blank line is either

- a bare event: a :class:`JobSubmitted` (``"kind": "job_submitted"``) or a
  :class:`NodeTelemetry` (``"kind": "node_telemetry"``), exactly as on the wire; a job's
  ``offset_s`` is its ``event_time`` (required on such a line) minus the earliest bare job
  line's ``event_time`` in the file; or
- an envelope ``{"offset_s": <seconds>, "event": {...}}`` that fixes the offset explicitly.

Node lines are the inventory, published as written; a line without ``source`` is an inventory
entry (``"inventory"``, as every other trace's nodes: found by review, it defaulted to ``"agent"``,
which the simulated agents do not take for a node of theirs, and every job placed there was refused). Lines that are
not JSON, not an object, of another kind, fail validation, are nested too deeply to decode, or are
larger on the wire than the worker admits (``SEMSCHED_MAX_MESSAGE_BYTES``) are bad lines; so is a duplicate ``job_id`` /
``node_id``. Blank lines and lines starting with ``#`` are skipped.
The path is required (there is no default file); ``.gz`` is read transparently.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from ops.traces.base import TraceFormatError, TraceJob, TraceLoader, check_offset, open_text, undecodable
from scheduling.events import JobSubmitted, NodeTelemetry


class JsonlLoader(TraceLoader):
    """``JsonlLoader(path, **selection)``."""

    name = "jsonl"
    parts_optional = True
    summary = "canonical JobSubmitted / NodeTelemetry JSON lines (for producers); path required"

    def __init__(self, path: str | Path | None = None, **opts: object) -> None:
        if path is None:
            raise ValueError("the jsonl trace needs a path")
        super().__init__(path, **opts)  # type: ignore[arg-type]
        self._inventory: list[NodeTelemetry] = []

    @classmethod
    def default_path(cls) -> Path:  # pragma: no cover - never used, path is required
        raise ValueError("the jsonl trace has no default path")

    def _lines(self) -> Iterator[tuple[int, str]]:
        try:
            fh = open_text(self.path)
        except OSError as e:
            raise TraceFormatError(self.path, 0, f"cannot open: {e.strerror or e}") from None
        n = 0  # the last line read (a file unreadable from its first line reports line 1)
        with fh:
            try:
                for n, text in enumerate(fh, 1):
                    s = text.strip()
                    if s and not s.startswith("#"):
                        self.stats.lines += 1
                        yield n, s
            except (EOFError, OSError, zlib.error) as e:  # (zlib: a damaged .gz)
                self._broken_off(self.path, n + 1, e)

    def _parse_jobs(self) -> Iterable[TraceJob]:
        jobs: list[tuple[float | None, datetime, JobSubmitted]] = []
        seen_jobs: dict[str, int] = {}
        seen_nodes: dict[str, int] = {}
        for line, text in self._lines():
            try:
                offset, event = self._decode(text)
                if isinstance(event, NodeTelemetry):
                    if event.node_id in seen_nodes:
                        raise ValueError(
                            f"duplicate node {event.node_id!r} (first at line {seen_nodes[event.node_id]})"
                        )
                    seen_nodes[event.node_id] = line
                    self._inventory.append(event)
                    continue
                if event.job_id in seen_jobs:
                    raise ValueError(
                        f"duplicate job {event.job_id!r} (first at line {seen_jobs[event.job_id]})"
                    )
            except (ValueError, ValidationError) as e:
                self._bad_exc(self.path, line, e)
                continue
            except RecursionError:  # JSON nested deeper than the decoder (or the model) goes: a traceback, no line
                self._bad(self.path, line, "nested too deeply")
                continue
            seen_jobs[event.job_id] = line
            jobs.append((offset, event.event_time, event, line))
        if not jobs:
            return []
        # the bare job lines' times only: an enveloped job without event_time gets the time it is read
        # at, which made the bare jobs' offsets depend on the wall clock (found by review)
        t0 = min((t for off, t, _, _ in jobs if off is None), default=None)
        out = []
        for off, t, ev, line in jobs:
            try:  # (a bare line's offset is bounded as an enveloped one's: found by review, 30 years apart passed)
                at = off if off is not None or t0 is None else check_offset((t - t0).total_seconds(), "event_time - the first's")
            except ValueError as e:
                self._bad_exc(self.path, line, e)
                continue
            out.append(TraceJob(offset_s=at, event=ev))
        return out

    def _decode(self, text: str) -> tuple[float | None, JobSubmitted | NodeTelemetry]:
        if undecodable(text):
            raise ValueError("invalid UTF-8")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"not JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(obj, dict):
            raise ValueError("a line must be a JSON object")
        offset = None
        if "event" in obj and "kind" not in obj:
            extra = set(obj) - {"offset_s", "event"}
            if extra:
                raise ValueError(f"unexpected envelope keys {sorted(extra)}")
            offset = obj.get("offset_s")
            if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int | float)
                                       or not math.isfinite(offset)):  # fmt: skip
                raise ValueError(f"offset_s must be a finite number >= 0, not {offset!r}")  # (inf: the replay hung)
            if offset is not None:
                check_offset(float(offset), "offset_s")
            obj = obj["event"]
            if not isinstance(obj, dict):
                raise ValueError("event must be a JSON object")
        kind = obj.get("kind")
        if kind == "job_submitted" and offset is None and "event_time" not in obj:  # (it would default to now)
            raise ValueError("a bare job line needs its event_time, which sets its offset; or wrap it as "
                             '{"offset_s": <seconds>, "event": {...}}')  # fmt: skip
        # strict, as the worker decodes the wire: a mistyped field ("1000", true) is refused, not coerced
        event: JobSubmitted | NodeTelemetry
        if kind == "job_submitted":
            event = JobSubmitted.model_validate_json(json.dumps(obj), strict=True)
        elif kind == "node_telemetry":
            event = NodeTelemetry.model_validate_json(json.dumps({"source": "inventory", **obj}), strict=True)
        else:
            raise ValueError(f"kind must be job_submitted or node_telemetry, not {kind!r}")
        # as the worker admits it (it would dead-letter a larger one), as the replay publishes it (found by review:
        # measured as parsed, it was up to 14 bytes short)
        self._on_the_wire(event)
        return (None if offset is None or kind != "job_submitted" else float(offset)), event

    def _parse_nodes(self, jobs: list[TraceJob]) -> Iterator[NodeTelemetry]:
        return iter(self._inventory)


def write_jsonl(nodes: Iterable[NodeTelemetry], jobs: Iterable[TraceJob], path: str | Path) -> int:
    """Export an inventory and jobs as a jsonl trace (envelopes with explicit offsets);
    returns the number of lines written."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for node in nodes:
            fh.write(node.model_dump_json() + "\n")
            n += 1
        for job in jobs:
            fh.write(
                json.dumps({"offset_s": job.offset_s, "event": json.loads(job.event.model_dump_json())})
                + "\n"
            )
            n += 1
    return n
