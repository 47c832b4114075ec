"""Held-out evaluation of duration predictors, without leaking the future.

:func:`time_split` cuts a trace's finished jobs at a time ``T`` (the submission time of the
job at ``train_fraction`` of them, by count):

- **train**: submitted before ``T`` *and finished before* ``T`` — the labels a model trained at
  ``T`` could have had;
- **late**: submitted before ``T``, finished at or after it — not trained on; observed online once
  they finish;
- **test** (held out): submitted at or after ``T``.

:func:`replay_online` then walks time forward: before the predictions for the test jobs
submitted at time ``t``, every job finished before ``t`` (late and earlier test jobs) is observed,
exactly what a worker's predictor would have seen (a job finishing at ``t`` itself is not: a job of
0 s would otherwise be observed before its own prediction). A finish time is ``submit + run time`` (the
traces' queueing delay before the first start is not modelled: observations can come a
little early for jobs that queued, and a job that queued may be trained on though it ended after
``T``: 12 of Google 2011's training jobs at the 0.75 split, 1 of dlrm2025's, none of openb's; a
review measured the history baseline's errors 0.01 worse with the real end times). The archive
says when each job ended (``Finished.end``), and its records are split by that.

:func:`accuracy`: relative error ``|p − t| / max(t, 1 s)``; the share within 100 % relative
error (the issue's target) — note that it only bounds over-prediction (``p ≤ 2t``): any
``p ≤ t`` passes, so it is reported beside the symmetric share within a factor of 2 and the
mean absolute log error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduling.duration_estimate import HistoryDurationPredictor
from scheduling.job import JobRequest


@dataclass
class Finished:
    """One job with a known run time: when it was submitted and how long it ran, and when it ended
    where the source says (the archive; else ``submit + duration``: see the module docstring)."""

    submit: float
    job: JobRequest
    duration: float
    end: float | None = None

    @property
    def finish(self) -> float:
        return self.submit + self.duration if self.end is None else self.end

    @property
    def start(self) -> float:
        """When it began to run: its end less its run time (its submission for a trace file's job)."""
        return self.finish - self.duration


@dataclass
class Split:
    cut: float
    train: list[Finished]
    late: list[Finished]
    test: list[Finished]

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "late": len(self.late), "test": len(self.test)}


def time_split(records: Sequence[Finished], train_fraction: float = 0.75) -> Split:
    """See the module docstring; ``records`` in any order (sorted here, stably)."""
    if not 0 < train_fraction < 1:
        raise ValueError("train_fraction must be within (0, 1)")
    recs = sorted(records, key=lambda r: r.submit)
    if len(recs) < 2:
        raise ValueError("need at least 2 finished jobs to split")
    cut = recs[min(len(recs) - 1, int(len(recs) * train_fraction))].submit
    before = [r for r in recs if r.submit < cut]
    # finished strictly before the cut, as the replay observes them (found by review: one at the cut itself was
    # trained on, though the replay would not have seen it before predicting a job submitted then)
    return Split(cut=cut, train=[r for r in before if r.finish < cut],
                 late=[r for r in before if r.finish >= cut],
                 test=[r for r in recs if r.submit >= cut])  # fmt: skip


@dataclass
class Run:
    """A job of a trace, finished or not, as far as the trace tells when it ran: ``started`` / ``ended``
    are when its (first) run began and ended for any reason (None: it never started / it was
    still running at the trace's end)."""

    job: JobRequest
    submit: float
    started: float | None
    ended: float | None


def data_end(runs: Sequence[Run], records: Sequence[Finished] = ()) -> float | None:
    """The latest time the source tells of: a submission, start or end among ``runs``, a finish among
    ``records`` (None when there are none): where the data ends."""
    times = [r.finish for r in records] + [t for r in runs for t in (r.submit, r.started, r.ended) if t is not None]
    return max(times, default=None)


def running_at_cut(split: Split, runs: Sequence[Run] | None = None) -> list[tuple[JobRequest, float, float]]:
    """``(job, started, elapsed)`` of the jobs submitted before the cut and still running at it, what a
    model trained at the cut knows of them: a lower bound on their run time (the censored loss),
    ``elapsed = cut − started``.

    With ``runs`` (every job of the trace, with a run time or not): those that had started by the
    cut and had not ended by it, ``started`` when their (latest) run began, whether or not they
    finish later in the trace. Without (a source that does not say when its jobs ran): the split's
    late jobs that had started by the cut (``started = finish − duration``: their submission for a
    trace file); those are only the jobs that finish later, which is future information, and leaves
    out the longest (found by review: dlrm2025 has 560 of them at its cut, against 3,204 instances
    running then). A job the split trains on is never censored."""
    if runs is None:
        return [(r.job, r.start, split.cut - r.start) for r in split.late if r.start < split.cut]
    # a job is its cluster and id (found by review: by id alone, one cluster's trained job hid another's running one)
    trained = {(r.job.cluster, r.job.job_id) for r in split.train}
    running: dict[tuple[str, str], tuple[JobRequest, float, float]] = {}  # one per job: its latest start before the cut
    for r in runs:  # (two attempts of one job can look running: an end that never reached the archive)
        job = (r.job.cluster, r.job.job_id)
        if (r.started is not None and r.submit < split.cut and r.started < split.cut
                and (r.ended is None or r.ended > split.cut) and job not in trained):  # fmt: skip
            known = running.get(job)
            if known is None or split.cut - r.started < known[2]:
                running[job] = (r.job, r.started, split.cut - r.started)
    return list(running.values())


def warm_history(train: Sequence[Finished]) -> HistoryDurationPredictor:
    """The history baseline fed the training jobs in the order they finished (as a worker's would
    have seen them: its windows of recent run times then hold the jobs that finished last)."""
    history = HistoryDurationPredictor()
    for r in sorted(train, key=lambda r: r.finish):
        history.observe(r.job, r.duration)
    return history


MISSING = 1e18  # the error of a missing prediction (finite: percentiles interpolate)
Observe = Callable[[list[JobRequest], list[float]], None]
Predict = Callable[[list[JobRequest]], dict[str, np.ndarray]]


def replay_online(split: Split, observe: Observe, predict: Predict,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Per variant name (the keys ``predict`` returns), predictions in seconds for
    ``split.test`` in its order. ``observe`` gets finished jobs in finish order."""
    finishes = sorted(split.late + split.test, key=lambda r: r.finish)
    out: dict[str, list[np.ndarray]] = {}
    fi, i, n = 0, 0, len(split.test)
    while i < n:
        t = split.test[i].submit
        done: list[Finished] = []
        # finished strictly before t: a job of 0 s submitted at t is not observed before it is predicted
        while fi < len(finishes) and finishes[fi].finish < t:
            done.append(finishes[fi])
            fi += 1
        if done:
            observe([r.job for r in done], [r.duration for r in done])
        # every test job submitted up to the next finish is predicted in one batch
        next_finish = finishes[fi].finish if fi < len(finishes) else np.inf
        j = i
        while j < n and split.test[j].submit <= next_finish:
            j += 1
        j = max(j, i + 1)
        for name, values in predict([r.job for r in split.test[i:j]]).items():
            out.setdefault(name, []).append(np.asarray(values, np.float64))
        i = j
        if progress is not None:
            progress(i, n)
    return {k: np.concatenate(v) for k, v in out.items()}


def relative_errors(pred: np.ndarray, true: np.ndarray, floor_s: float = 1.0) -> np.ndarray:
    return np.abs(pred - true) / np.maximum(true, floor_s)


def accuracy(pred: Sequence[float] | np.ndarray, true: Sequence[float] | np.ndarray,
             floor_s: float = 1.0) -> dict[str, float]:  # fmt: skip
    """The accuracy figures of one predictor (see the module docstring); a missing
    prediction (NaN) counts as wrong, and ``answered`` says how many were not missing."""
    p = np.asarray(pred, np.float64)
    t = np.asarray(true, np.float64)
    ok = ~np.isnan(p)
    rel = np.where(ok, relative_errors(np.nan_to_num(p), t, floor_s), MISSING)
    lp, lt = np.log(np.maximum(np.nan_to_num(p), floor_s)), np.log(np.maximum(t, floor_s))
    factor = np.where(ok, np.abs(lp - lt), MISSING)
    return {
        "n": int(len(t)),
        "answered": float(ok.mean()) if len(t) else 0.0,
        "within_100pct": float((rel <= 1.0).mean()) if len(t) else float("nan"),
        "median_rel_err": float(np.median(rel)) if len(t) else float("nan"),
        "p90_rel_err": float(np.quantile(rel, 0.9)) if len(t) else float("nan"),
        "within_2x": float((factor <= np.log(2.0)).mean()) if len(t) else float("nan"),
        "mae_log": float(np.mean(factor[ok])) if ok.any() else float("nan"),
    }
