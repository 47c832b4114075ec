"""A new duration model version without a restart (``sjf-learned``, ``gittins-learned``).

As with the placement model (:mod:`inference.backends.inprocess`), the ordering's ``model_dir`` is
usually the ``models/duration/latest`` symlink that ``semsched train-duration`` repoints. Every
``WATCH_S`` seconds the worker resolves it again. When it points to another version directory:

1. that version is loaded, off the event loop, and taught what the worker's estimate learned since
   its start (:mod:`streams.finished_log`: the archive warm-up's jobs and each job seen finishing
   since, the latest 20,000, minus those the version trained on, as the start-up warm-up does); a
   version trained on the archive that cannot say which jobs it read is swapped in untaught, as it
   would be at a start, and the log and ``/status`` say so (``taught``: "not warmed: …");
2. between two steps (the loop's step lock), the jobs that finished meanwhile are taught too, and
   the new version replaces the old one: in the ordering, and as the estimate the worker feeds
   and the decision records read (``Worker.durations``). The old version's answers for the
   pending jobs are kept as stale ones and recomputed ``refresh_budget`` a step (new jobs at once).

Loading and teaching take seconds (a MiniLM model encodes each distinct text, ~2 s per 1,000 on
2 cores), while the current version keeps ordering.

A version that fails to load is reported once (``error``, in ``/status`` under
``duration_model``) and not loaded again until its files change; the current one keeps ordering.
An ordering that had no model at start (``fell_back``) takes the first version published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from storage.queries.finished_jobs import FinishedJob
from streams.app import Worker
from streams.duration_warm_up import teach
from streams.finished_log import FinishedLog

log = logging.getLogger("semsched.worker")

WATCH_S = 5.0
LOG_KEEP = 20_000  # finished jobs kept for a new version at least


def _mark(directory: Path) -> tuple[Path, int]:
    from inference.duration.io import version_mark

    return version_mark(directory)


def _latest_per_job(rows: list[FinishedJob]) -> list[FinishedJob]:
    """One row per (cluster, job id), its last (a job the warm-up could not teach is seen finishing again)."""
    last = {(f.submission.cluster, f.submission.job_id): f for f in rows}
    return list(last.values())


def _load_and_teach(path: Path, rows: list[FinishedJob]) -> tuple[Any, str]:
    from inference.duration.io import load_predictor

    # (torch's thread count left alone: a process-wide setting mid-run, which threads starting meanwhile,
    # the placement model's among them, would keep: found by review)
    predictor = load_predictor(path, single_thread=False)
    return predictor, teach(predictor, _latest_per_job(rows), "the worker had learned").note


class DurationReload:
    """Watches ``ordering.model_dir`` (module docstring); ``check()`` from a timer."""

    def __init__(self, w: Worker, ordering: Any) -> None:
        self.w, self.ordering = w, ordering
        self.error: str | None = None
        self.swaps = 0
        self.note = ""
        self._refused: set[tuple[Path, int]] = set()

    @classmethod
    def of(cls, w: Worker, policy: Any) -> DurationReload | None:
        """For a policy whose ordering orders by a duration model, else None."""
        ordering = getattr(policy, "ordering", policy)
        return cls(w, ordering) if callable(getattr(ordering, "use_predictor", None)) else None

    def moved(self) -> Path | None:
        """The version directory ``model_dir`` resolves to, when it is another than the loaded one and not refused."""
        try:
            target = Path(self.ordering.model_dir).resolve(strict=True)
        except OSError:  # no model published (yet), or its link removed: keep what orders now
            return None
        if target == self.ordering.model_path:
            self.error = None  # (latest pointed back to it after a refused version: found by review)
            return None
        return None if _mark(target) in self._refused else target

    async def check(self) -> bool:
        """Swap a new version in (module docstring); True if one was."""
        target = self.moved()
        if target is None:
            return False
        mark, log_mark = _mark(target), self.w.finished_log.added
        try:
            fresh, note = await asyncio.to_thread(_load_and_teach, target, self.w.finished_log.latest())
        except Exception as e:  # half-written, corrupt, another format: keep ordering with the current one
            self._refused.add(mark)
            self.error = f"{target}: {type(e).__name__}: {e}"
            log.warning("duration model %s not loaded, the current one (%s) keeps ordering: %s", target,
                        self.version, self.error)  # fmt: skip
            return False
        loop = getattr(self.w, "loop", None)
        async with loop._ticking if loop is not None else contextlib.nullcontext():  # between two steps
            if more := self.w.finished_log.since(log_mark):  # finished while it loaded
                teach(fresh, more, "finished meanwhile")
            was = self.version
            self.ordering.use_predictor(fresh, target)
            self.w.durations = fresh
        self.error, self.note, self.swaps = None, note, self.swaps + 1
        log.warning("duration model %s -> %s (%s): %s", was, fresh.config.version, target, note)
        return True

    @property
    def version(self) -> str | None:
        return self.ordering.model_version

    def as_dict(self) -> dict[str, Any]:
        """For ``/status``."""
        return {"version": self.version, "path": str(self.ordering.model_path or "") or None, "swaps": self.swaps,
                "error": self.error, "taught": self.note or None}  # fmt: skip


def register_duration_reload(w: Worker, policy: Any) -> DurationReload | None:
    """Check for a new duration model version every ``WATCH_S`` seconds (a policy that orders by one)."""
    reload = DurationReload.of(w, policy)
    if reload is None:
        return None
    w.duration_reload = reload  # type: ignore[attr-defined]
    # what a new version is taught: kept for these policies only (~2.5 KB a job), and not sized by the warm-up
    # alone: SEMSCHED_DURATION_WARM_UP=0 (no archive read at start) taught a new version nothing (found by review)
    w.finished_log = FinishedLog(max(w.settings.duration_warm_up, LOG_KEEP))

    @w.app.timer(interval=WATCH_S)
    async def duration_model_watch() -> None:
        try:
            await reload.check()
        except Exception:  # an estimate's new version is never a reason to stop the worker
            log.exception("looking for a new duration model")

    return reload
