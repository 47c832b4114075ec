"""Training a duration predictor on the archive's finished jobs: what it learns from in production.

``ops`` reads the finished jobs (``storage.queries.finished_jobs``: each job's first
submission and the run time of its last finished attempt; the replayed trace's answer,
``trace_duration_s``, is never read) and passes them in: ``inference`` holds no SQL.
:func:`train_from_finished` trains on them, split in time by the submission time
(:func:`inference.duration.train.train_predictor` with ``submit_times``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from inference.duration.config import DurationConfig
from inference.duration.evaluate import Finished, Run
from inference.duration.predictor import LearnedDurationPredictor
from inference.encoders.base import TextEncoder
from scheduling.events import JobSubmitted
from scheduling.job import JobRequest


class FinishedRun(Protocol):
    """One finished job as the archive gives it (``storage.queries.finished_jobs.FinishedJob``)."""

    @property
    def submission(self) -> JobSubmitted: ...

    @property
    def submit_s(self) -> float: ...

    @property
    def run_s(self) -> float: ...

    @property
    def finish_s(self) -> float: ...


def as_records(finished: Sequence[FinishedRun]) -> list[Finished]:
    """The runs as :class:`~inference.duration.evaluate.Finished` records (``submit_time`` = epoch s)."""
    return [Finished(float(f.submit_s), JobRequest.from_event(f.submission, submit_time=f.submit_s),
                     max(0.0, float(f.run_s)), float(f.finish_s)) for f in finished]  # fmt: skip


class StartedRun(Protocol):
    """One attempt that started, as the archive gives it (``storage.queries.job_runs.JobRun``)."""

    @property
    def submission(self) -> JobSubmitted: ...

    @property
    def submit_s(self) -> float: ...

    @property
    def started_s(self) -> float: ...

    @property
    def ended_s(self) -> float | None: ...


def as_runs(runs: Sequence[StartedRun]) -> list[Run]:
    """The attempts as :class:`~inference.duration.evaluate.Run` records: what a model trained at a cut
    learns of the jobs running at it (:func:`~inference.duration.evaluate.running_at_cut`)."""
    return [Run(JobRequest.from_event(r.submission, submit_time=r.submit_s), float(r.submit_s), float(r.started_s),
                None if r.ended_s is None else float(r.ended_s)) for r in runs]  # fmt: skip


def train_from_finished(finished: Sequence[FinishedRun], config: DurationConfig | None = None, *,
                        encoder: TextEncoder | None = None, **kwargs: Any) -> LearnedDurationPredictor:  # fmt: skip
    """A predictor trained (and indexed) on the archive's finished jobs; ``kwargs`` go to
    :func:`~inference.duration.train.train_predictor`."""
    from inference.duration.train import train_predictor

    records = as_records(finished)
    return train_predictor([r.job for r in records], [r.duration for r in records], config,
                           submit_times=[r.submit for r in records], finish_times=[r.finish for r in records],
                           encoder=encoder, **kwargs)  # fmt: skip


def trained_on(config: DurationConfig, submit_s: float, run_s: float, finish_s: float) -> bool | None:
    """Whether a finished job of the archive is among those a predictor trained from the archive
    (``semsched train-duration --trace archive``) learned from, and so already in its index: True /
    False; ``None`` when the model cannot say (trained before it recorded the latest finish it read,
    or on a ``--limit`` subset). Always False for a model trained on a trace file.

    The model read the jobs that had finished by its training: those whose finish is at most the
    latest it read (``finished_through_s``). Of those it trained on the time split's
    (:func:`~inference.duration.evaluate.time_split`: submitted before the cut and ended before it,
    when the archive says it ended; found by review: by submission + run time, a job that queued or
    was retried, and ended after the cut, counted as trained on), or on all of them without a cut (``--train-fraction 1``)."""
    info = config.train_info
    if info.get("trace") != "archive":
        return False
    through = info.get("finished_through_s")
    if through is None or info.get("limit") is not None:
        return None
    # at the archive's precision (DateTime64(3)): the worker's live log keeps the microseconds the archive
    # cut off, and the last job the model read counted as finished after it (found by review: taught twice)
    submit, finish = _ms(submit_s), _ms(finish_s)
    if finish > _ms(float(through)):
        return False  # finished after the model read the archive
    cut = info.get("cut_s")
    return True if cut is None else (submit < _ms(float(cut)) and finish < _ms(float(cut)))


def _ms(seconds: float) -> int:
    """Whole milliseconds of epoch ``seconds``, as ClickHouse's DateTime64(3) keeps them (cut off, not rounded)."""
    return int(round(seconds * 1e6)) // 1000
