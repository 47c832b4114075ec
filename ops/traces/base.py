"""What every trace loader shares: the replayable job, the bad-line error, the selection
options (window, duration filter, seeded sample, limit) and the bookkeeping that makes
sure nothing is dropped silently.

A loader parses its files once (lazily, on first use), keeps the parsed jobs sorted by
submit offset, then applies the selection in a fixed, documented order:

1. window      — ``start_offset <= offset_s < end_offset`` (either bound optional)
2. duration    — ``min_duration_s <= trace_duration_s <= max_duration_s``; when a duration
                 bound is set, a job whose duration is unknown is dropped too (counted
                 separately: it cannot be shown to be "moderate")
3. sample      — a seeded random subset: ``sample=300`` keeps 300 jobs, ``sample=0.1``
                 keeps 10 %; the kept jobs stay in submit order
4. limit       — the first ``limit`` jobs left

Every step counts what it removed in :attr:`TraceLoader.stats`; bad lines are counted
there too and kept in :attr:`TraceLoader.errors` (or raised with ``strict=True``).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
import re
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, ClassVar, TextIO

from pydantic import ValidationError

from scheduling.events import JobSubmitted, NodeTelemetry, format_validation_error


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One submission of a trace: when (seconds from the trace start) and what. ``started_s`` /
    ``ended_s``: when its (first) run began, and when that run ended for any reason, where the trace
    says (None: it never started / it was still running at the trace's end, or the trace does not
    say). Not part of the event: what a duration model trained at a cut may know of the jobs still
    running then (:func:`inference.duration.evaluate.running_at_cut`)."""

    offset_s: float
    event: JobSubmitted
    started_s: float | None = None
    ended_s: float | None = None


class TraceLineError(ValueError):
    """A line of a trace file that cannot be turned into an event."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}" if line > 0 else f"{self.path}: {reason}")  # 0: the file

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        return (type(self), (self.path, self.line, self.reason))


class TraceFormatError(TraceLineError):
    """The file as a whole is not in the expected format (wrong header, unreadable).
    Always raised, also without ``strict``: there is nothing to skip to."""


@dataclass
class Selection:
    """Which jobs of a trace to replay; see the module docstring for the order."""

    limit: int | None = None
    start_offset: float | None = None
    end_offset: float | None = None
    min_duration_s: float | None = None
    max_duration_s: float | None = None
    sample: int | float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("start_offset", "end_offset", "min_duration_s", "max_duration_s"):
            if (value := getattr(self, name)) is not None and math.isnan(value):
                raise ValueError(f"{name} must be a number, not nan")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must be >= 0")
        if self.sample is not None and (
            self.sample < 0 or (isinstance(self.sample, float) and self.sample > 1)
        ):
            raise ValueError("sample is a count (int >= 0) or a fraction (float in 0..1)")
        if (self.start_offset is not None and self.end_offset is not None
                and self.end_offset < self.start_offset):  # fmt: skip
            raise ValueError("end_offset must be >= start_offset")
        if (self.min_duration_s is not None and self.max_duration_s is not None
                and self.max_duration_s < self.min_duration_s):  # fmt: skip
            raise ValueError("max_duration_s must be >= min_duration_s")  # (no job can be selected)

    @property
    def filters_duration(self) -> bool:
        return self.min_duration_s is not None or self.max_duration_s is not None


@dataclass
class LoadStats:
    """What a loader read and what it left out, and why. ``selected`` = jobs yielded."""

    lines: int = 0
    parsed: int = 0
    bad_lines: int = 0
    outside_window: int = 0
    duration_out_of_range: int = 0
    duration_unknown: int = 0
    sampled_out: int = 0
    over_limit: int = 0
    selected: int = 0
    nodes: int = 0
    notes: dict[str, int] = field(default_factory=dict)

    def note(self, key: str, n: int = 1) -> None:
        """Count a documented, non-error special case (e.g. ``resubmits_ignored``)."""
        self.notes[key] = self.notes.get(key, 0) + n

    def as_dict(self) -> dict[str, int]:
        d = {k: v for k, v in vars(self).items() if k != "notes"}
        d.update(self.notes)
        return d


class TraceLoader(ABC):
    """Base of every loader: ``nodes()`` (the inventory) and ``jobs()`` (sorted by offset).

    Subclasses implement :meth:`_parse_jobs` (all valid jobs, any order, reporting bad
    lines through :meth:`_bad`) and :meth:`_parse_nodes`.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: whether a trace of jobs alone or of nodes alone is whole (jsonl: a producer's submissions for a cluster
    #: whose agents report its nodes, or an inventory); in the others both are, and the replay refuses one empty
    parts_optional: ClassVar[bool] = False

    def __init__(self, path: str | Path | None = None, *, strict: bool = False, limit: int | None = None,
                 start_offset: float | None = None, end_offset: float | None = None,
                 min_duration_s: float | None = None, max_duration_s: float | None = None,
                 sample: int | float | None = None, seed: int = 0) -> None:  # fmt: skip
        self.path = Path(path) if path is not None else self.default_path()
        self.strict = strict
        self.selection = Selection(limit=limit, start_offset=start_offset, end_offset=end_offset,
                                   min_duration_s=min_duration_s, max_duration_s=max_duration_s,
                                   sample=sample, seed=seed)  # fmt: skip
        self.errors: list[TraceLineError] = []
        self.stats = LoadStats()
        self._jobs: list[TraceJob] | None = None
        self._nodes: list[NodeTelemetry] | None = None
        self._source: str | None = None  # (replay_source, once)
        from streams.settings import Settings

        self.max_event_bytes = Settings().max_message_bytes  # the worker's limit (SEMSCHED_MAX_MESSAGE_BYTES)

    # -- what subclasses provide -------------------------------------------------------
    @classmethod
    @abstractmethod
    def default_path(cls) -> Path:
        """Where the trace lives under the shared data directory."""

    @abstractmethod
    def _parse_jobs(self) -> Iterable[TraceJob]:
        """Every valid job of the trace (unsorted, unselected)."""

    @abstractmethod
    def _parse_nodes(self, jobs: list[TraceJob]) -> Iterable[NodeTelemetry]:
        """The inventory. ``jobs`` are the selected jobs (synthesised inventories size
        themselves from them)."""

    # -- public API ------------------------------------------------------------------------
    @property
    def jobs_file(self) -> Path:
        """The file the jobs are read from (``path``, or the trace's file in the directory ``path`` names)."""
        return self.path

    def jobs(self) -> Iterator[TraceJob]:
        """The selected jobs, sorted by submit offset (stable: file order breaks ties)."""
        return iter(self.load_jobs())

    def nodes(self) -> Iterator[NodeTelemetry]:
        """The node inventory, ``source="inventory"``."""
        if self._nodes is None:
            self._nodes = list(self._parse_nodes(self.load_jobs()))
            self.stats.nodes = len(self._nodes)
        return iter(self._nodes)

    def load_jobs(self) -> list[TraceJob]:
        """Parse (once) and select; returns the cached list."""
        if self._jobs is None:
            parsed = sorted(self._parse_jobs(), key=lambda j: j.offset_s)
            self.stats.parsed = len(parsed)
            self._jobs = self._select(parsed)
            self.stats.selected = len(self._jobs)
        return self._jobs

    # -- helpers for subclasses ------------------------------------------------------------
    def _bad(self, path: str | Path, line: int, reason: str) -> None:
        """Report a bad line: raise under ``strict``, else count and keep it."""
        err = TraceLineError(path, line, reason)
        if self.strict:
            raise err
        self.errors.append(err)
        self.stats.bad_lines += 1

    def _broken_off(self, path: str | Path, line: int, exc: Exception) -> None:
        """The file cannot be read on from ``line`` (a truncated ``.gz``): with lines read before it
        and without ``strict``, one bad line (the good lines before it are kept); else
        :class:`TraceFormatError`."""
        if self.strict or self.stats.lines == 0:
            raise TraceFormatError(path, line, f"unreadable: {exc}") from None
        self._bad(path, line, f"unreadable from here on: {exc}")

    def _on_the_wire(self, event: JobSubmitted | NodeTelemetry) -> None:
        """Raise :class:`ValueError` when ``event``, as the replay publishes it (re-stamped, with a derived id
        for a job without one), is over the worker's message limit: it would be dead-lettered, and the
        producer refuses to send it. Each loader calls it on the line's event, so the line is a bad line of
        the dry run (found by review: an openb pod with a 15,000-model GPU list passed the dry run, and the
        real replay stopped at it with the jobs after it unsent)."""
        from ops.traces.published import LONGEST_STAMP, published, replay_source

        if self._source is None:
            self._source = replay_source(self)
        size = len(published(event, self._source, LONGEST_STAMP).to_bytes())
        if size > self.max_event_bytes:
            raise ValueError(f"the event is {size:,} bytes on the wire; the worker refuses events over "
                             f"{self.max_event_bytes:,} (SEMSCHED_MAX_MESSAGE_BYTES)")  # fmt: skip

    def _bad_exc(self, path: str | Path, line: int, exc: Exception) -> None:
        reason = format_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
        self._bad(path, line, reason or type(exc).__name__)

    def _select(self, jobs: list[TraceJob]) -> list[TraceJob]:
        sel, st = self.selection, self.stats
        if sel.start_offset is not None or sel.end_offset is not None:
            lo = sel.start_offset if sel.start_offset is not None else float("-inf")
            hi = sel.end_offset if sel.end_offset is not None else float("inf")
            kept = [j for j in jobs if lo <= j.offset_s < hi]
            st.outside_window += len(jobs) - len(kept)
            jobs = kept
        if sel.filters_duration:
            lo = sel.min_duration_s if sel.min_duration_s is not None else float("-inf")
            hi = sel.max_duration_s if sel.max_duration_s is not None else float("inf")
            kept = []
            for j in jobs:
                d = j.event.trace_duration_s
                if d is None:
                    st.duration_unknown += 1
                elif lo <= d <= hi:
                    kept.append(j)
                else:
                    st.duration_out_of_range += 1
            jobs = kept
        if sel.sample is not None:
            k = sel.sample if isinstance(sel.sample, int) else round(sel.sample * len(jobs))
            if k < len(jobs):
                idx = sorted(random.Random(sel.seed).sample(range(len(jobs)), k))
                st.sampled_out += len(jobs) - k
                jobs = [jobs[i] for i in idx]
        if sel.limit is not None and len(jobs) > sel.limit:
            st.over_limit += len(jobs) - sel.limit
            jobs = jobs[: sel.limit]
        return jobs

    def _rows(self, path: Path, *, header: list[str] | None) -> Iterator[tuple[int, list[str]]]:
        """``(line number, fields)`` of a CSV (plain or ``.gz``). With ``header``, the first
        line must equal it (else :class:`TraceFormatError`) and rows must have as many
        fields (else a bad line). Blank lines are skipped; line numbers are physical.

        Each line is a record on its own: no trace format has a field over several lines, and a
        stray quote read by one reader over the file ran its field on into the following lines,
        which vanished into one bad record reported at the end (the count and the line wrong)."""
        try:
            raw = open_text(path)
        except OSError as e:
            raise TraceFormatError(path, 0, f"cannot open: {e.strerror or e}") from None
        n = 0  # the last line read
        with raw as fh:
            want = len(header) if header else None
            try:
                for n, text in enumerate(fh, 1):
                    try:
                        if "\r" in text.rstrip("\r\n"):  # (found by review: the csv module's advice on how to
                            raise csv.Error("a carriage return inside the line: lines end in \\n or \\r\\n "  # open files)
                                            "(a file whose lines end in \\r alone is not read)")
                        row = next(csv.reader([text]), [])
                    except csv.Error as e:  # this line's alone (a field over the csv module's limit, say):
                        # the good lines after it are read on (found by review: it was blamed on the next
                        # line, and every line after it was dropped)
                        if n == 1 and header is not None:
                            raise TraceFormatError(path, 1, f"expected header {','.join(header)!r}: {e}") from None
                        self.stats.lines += 1
                        self._bad(path, n, str(e))
                        continue
                    if n == 1 and header is not None:
                        if [c.strip() for c in row] != header:
                            raise TraceFormatError(path, 1, f"expected header {','.join(header)!r}, "
                                                            f"got {','.join(row)!r}")  # fmt: skip
                        continue
                    if not row or (len(row) == 1 and not row[0].strip()):
                        continue
                    self.stats.lines += 1
                    if any("\n" in c or "\r" in c for c in row):  # a quote opened and not closed on the line
                        self._bad(path, n, "a quoted field is not closed on its line")
                        continue
                    if want is not None and len(row) != want:
                        self._bad(path, n, f"expected {want} fields, got {len(row)}")
                        continue
                    if any(undecodable(c) for c in row):
                        self._bad(path, n, "invalid UTF-8")
                        continue
                    yield n, row
            except (csv.Error, EOFError, gzip.BadGzipFile, OSError, zlib.error) as e:  # (zlib: a damaged .gz)
                self._broken_off(path, n + 1, e)
            if n == 0 and header is not None:
                raise TraceFormatError(path, 1, f"expected header {','.join(header)!r}, got ''")


#: the latest submit offset a trace may give a job: ten years (the contract's bound on a duration); found by
#: review: an offset of 1e300 s was accepted, the dry run announced a replay of 1e300 s and `bench trace` a makespan
MAX_OFFSET_S = 10 * 365 * 86400.0


def check_offset(offset: float, what: str) -> float:
    """``offset`` (seconds from the trace's start), or ``ValueError`` naming ``what`` when it is not in
    ``0..MAX_OFFSET_S``: one rule for every trace format."""
    if not 0 <= offset <= MAX_OFFSET_S:
        raise ValueError(f"{what} {offset:g} s is outside 0..{MAX_OFFSET_S:.0f} s (ten years) from the trace's start")
    return offset


def parse_float(value: str, what: str, *, required: bool = True) -> float | None:
    """A finite float, or None for an empty optional field; ``ValueError`` names ``what``."""
    v = value.strip()
    if not v:
        if required:
            raise ValueError(f"{what} is empty")
        return None
    try:
        f = float(v)
    except ValueError:
        raise ValueError(f"{what} is not a number: {v!r}") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{what} is not finite: {v!r}")
    return f


def parse_int(value: str, what: str, *, required: bool = True) -> int | None:
    """An integer (``"3"`` or ``"3.0"``), or None for an empty optional field. Digits are read as
    an integer, exactly: through a float, Google's 2**63 - 1 ("after the end of the trace") became
    2**63 and was never recognised."""
    digits = value.strip()
    if digits.lstrip("+-").isdigit():
        return int(digits)
    f = parse_float(value, what, required=required)
    if f is None:
        return None
    if f != int(f):
        raise ValueError(f"{what} is not an integer: {value.strip()!r}")
    return int(f)


GZIP_MAGIC = b"\x1f\x8b"


_UNDECODABLE = re.compile("[\udc80-\udcff]")


def undecodable(text: str) -> bool:
    """Whether ``text`` (read by :func:`open_text`) held bytes that are not UTF-8."""
    return _UNDECODABLE.search(text) is not None


def open_text(path: Path) -> TextIO:
    """Open a plain or gzip UTF-8 text file for reading; undecodable bytes become lone surrogates
    (:func:`undecodable`: the loaders report the line as a bad one instead of failing the whole file;
    found by review: they became U+FFFD, and a line holding that character, well encoded, was "invalid
    UTF-8"). Lines end at ``\n`` alone (``\r\n`` too): a carriage return inside a line is part of it
    (found by review: it split the line in two, and one half was accepted as a job of its own, every later
    line's number one too high). A file is read as
    gzip by its ``.gz`` name or its first bytes, and a leading byte-order mark (a spreadsheet's
    "CSV UTF-8") is skipped (found by review: a gzip file named ``.jsonl`` was "invalid UTF-8" on
    every line, and a BOM failed a CSV's header check)."""
    raw = open(path, "rb")  # noqa: SIM115  (opened once: a pipe, --path /dev/stdin or a FIFO, cannot be read
    try:  # twice; found by review: a first open to look at its first bytes took a buffer's worth of lines away)
        src: BinaryIO = raw
        if path.suffix == ".gz" or raw.peek(2)[:2] == GZIP_MAGIC:
            src = gzip.GzipFile(fileobj=raw, mode="rb")
            src.myfileobj = raw  # type: ignore[attr-defined]  # closed with it, as gzip.open(path) closes its file
        return io.TextIOWrapper(src, encoding="utf-8-sig", errors="surrogateescape", newline="\n")
    except BaseException:
        raw.close()
        raise
