"""``semsched bench duration``: held-out accuracy of the duration predictors (issue 4 point 6).

Per trace: its jobs with a known run time, split in time (:func:`inference.duration.evaluate.
time_split`: train = submitted before the cut *and* finished before it; held out = submitted
after it), then replayed online — each held-out job is predicted at its submission, after
every job that had finished by then was observed. Predictors:

- ``history`` — :class:`scheduling.duration_estimate.HistoryDurationPredictor` (the baseline
  ``sjf-predicted`` uses), fed the training jobs, then observing online;
- ``constant`` — the training median, for scale;
- per text encoder (``hashed``, ``minilm``): ``regression`` (the MLP alone), ``retrieval``
  (k nearest finished jobs alone), ``pair`` (their two-way blend: the answer before the
  per-key histories) and ``blend`` (the answer: ``pair`` mixed with the most specific key's
  history, by the weight validation chose) — one trained
  :class:`~inference.duration.predictor.LearnedDurationPredictor`, its four answers; unless
  ``censored=False``, its MLP also learns from the jobs still running at the cut as lower bounds
  (:func:`inference.duration.regression.censored_huber`).

Figures (:func:`inference.duration.evaluate.accuracy`): share within 100 % relative error
(the issue's target, 85.7 %), median and p90 relative error, share within a factor of 2 and
mean |log error|. Writes ``bench-duration.md/.json`` and one CDF plot of the relative error
per trace; ``--save DIR`` also writes each trained model to ``DIR/<trace>-<encoder>``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.console import wide_console
from ops.reports import Report
from scheduling.job import JobRequest

console = wide_console()
COLUMNS = ["trace", "encoder", "predictor", "held_out", "within_100pct", "median_rel_err", "p90_rel_err",
           "within_2x", "mae_log"]  # fmt: skip
TRACE_OPTIONS: dict[str, dict[str, Any]] = {
    # instances already running when the trace began only report their remaining life: not a run time
    "dlrm2025": {"include_preexisting": False},
}
TARGET = 0.857


def load_finished(trace: str, path: Path | None = None, limit: int | None = None) -> list[Any]:
    """The trace's jobs with a known run time as :class:`~inference.duration.evaluate.Finished`."""
    return load_records(trace, path, limit)[0]


def load_records(trace: str, path: Path | None = None, limit: int | None = None) -> tuple[list[Any], list[Any] | None]:
    """The trace's jobs with a known run time (``Finished``), and every job as a
    :class:`~inference.duration.evaluate.Run` (None when the trace does not say when its jobs ran: a
    jsonl file)."""
    from inference.duration.evaluate import Finished, Run
    from ops.traces import get_loader

    loader = get_loader(trace, path, limit=limit, strict=True, **TRACE_OPTIONS.get(trace, {}))
    jobs = [(j, JobRequest.from_event(j.event, submit_time=j.offset_s)) for j in loader.load_jobs()]
    finished = [Finished(j.offset_s, req, float(j.event.trace_duration_s)) for j, req in jobs
                if j.event.trace_duration_s is not None]  # fmt: skip
    if not any(j.started_s is not None for j, _ in jobs):
        return finished, None
    return finished, [Run(req, j.offset_s, j.started_s, j.ended_s) for j, req in jobs]


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)  # fmt: skip


def evaluate_trace(trace: str, encoders: Sequence[str], *, train_fraction: float, path: Path | None,
                   limit: int | None, save_dir: Path | None, epochs: int, censored: bool = True) -> dict[str, Any]:  # fmt: skip
    """Every predictor on one trace: rows for the table, relative errors for the plot, info."""
    from inference.duration.config import DurationConfig
    from inference.duration.evaluate import (
        accuracy,
        relative_errors,
        replay_online,
        running_at_cut,
        time_split,
        warm_history,
    )
    from inference.duration.io import save_predictor
    from inference.duration.predictor import make_encoder
    from inference.duration.train import train_predictor

    with console.status(f"loading {trace}…"):
        records, runs = load_records(trace, path, limit)
    split = time_split(records, train_fraction)
    running = running_at_cut(split, runs)
    true = np.array([r.duration for r in split.test])
    train_jobs, train_d = [r.job for r in split.train], [r.duration for r in split.train]
    train_t = [r.submit for r in split.train]
    unscored = unscored_held_out(split.cut, runs)
    console.print(f"[bold]{trace}[/]: {len(records):,} jobs with a run time; cut at {split.cut:,.0f} s → "
                  f"train {len(split.train):,}, running at the cut {len(running):,} ({len(split.late):,} of them finish "
                  f"later in the trace), held out {len(split.test):,}"
                  + (f"; not scored: {unscored['started']:,} held-out jobs that started and had not ended by the "
                     f"trace's end (median {unscored['median_elapsed_s']:,.0f} s run by then), {unscored['never_started']:,} "
                     "that never started" if unscored.get("started") or unscored.get("never_started") else ""))  # fmt: skip
    preds: dict[tuple[str, str], np.ndarray] = {}
    history = warm_history(split.train)  # in finish order, as a worker's predictor would have seen them
    with _progress() as bar:
        task = bar.add_task(f"{trace}: history baseline", total=len(split.test))

        def observe_history(jobs: list[JobRequest], durations: list[float]) -> None:
            for j, d in zip(jobs, durations, strict=True):
                history.observe(j, d)

        def predict_history(jobs: list[JobRequest]) -> dict[str, np.ndarray]:
            return {"history": np.array([np.nan if (p := history.predict(j)) is None else p for j in jobs])}

        res = replay_online(split, observe_history, predict_history, lambda i, n: bar.update(task, completed=i))
        preds[("–", "history")] = res["history"]
        preds[("–", "constant")] = np.full(len(true), float(np.median(train_d)))
        trained: dict[str, Any] = {}
        for enc_name in encoders:
            with console.status(f"{trace}: loading the {enc_name} encoder…"):
                encoder = make_encoder(enc_name, 64)
            task = bar.add_task(f"{trace}/{enc_name}: training", total=None)

            def step(stage: str, done: int, total: int, task: Any = task, enc_name: str = enc_name) -> None:
                bar.update(task, description=f"{trace}/{enc_name}: {stage}", completed=done, total=total)

            bar.update(task, description=f"{trace}/{enc_name}: encoding texts")
            model = train_predictor(train_jobs, train_d, DurationConfig(epochs=epochs, version=f"{trace}-{enc_name}"),
                                    submit_times=train_t, encoder=encoder, progress=step,
                                    running=running if censored else None)  # fmt: skip
            trained[enc_name] = model.config.train_info
            if save_dir is not None:
                save_predictor(Path(save_dir) / f"{trace}-{enc_name}", model)
            bar.update(task, description=f"{trace}/{enc_name}: held-out replay", completed=0, total=len(split.test))

            def predict(jobs: list[JobRequest], model: Any = model) -> dict[str, np.ndarray]:
                c = model.components(jobs)
                return {m: np.exp(c.answer(m)) for m in ("regression", "retrieval", "pair", "blend")}

            res = replay_online(split, model.observe_many, predict, lambda i, n, t=task: bar.update(t, completed=i))
            for m, v in res.items():
                preds[(enc_name, m)] = v
    rows = [{"trace": trace, "encoder": enc, "predictor": name, "held_out": len(true), **accuracy(p, true)}
            for (enc, name), p in preds.items()]  # fmt: skip
    # a missing prediction is wrong, as in the table: at the plot's cap, not 0 (found by review: 0 read as
    # "within 100 %", a relative error of 1)
    errors = {f"{name}" + ("" if enc == "–" else f" ({enc})"):
              np.minimum(relative_errors(np.where(np.isnan(p), np.inf, p), true), 10.0)
              for (enc, name), p in preds.items() if name != "constant"}  # fmt: skip
    return {"rows": rows, "errors": errors, "split": {"cut_s": split.cut, **split.sizes(), "running_at_cut": len(running),
                                                      "unscored_held_out": unscored},
            "trained": trained}  # fmt: skip


def unscored_held_out(cut: float, runs: Sequence[Any] | None) -> dict[str, Any]:
    """The jobs of the held-out period no row scores, having no run time: those that started and had not ended
    by the trace's end (the longest, by how long they had run then) and those that never started (found by
    review: the tables described the jobs that finish within the trace only, and did not say how many were
    left out). Empty when the trace does not say when its jobs ran."""
    if not runs:
        return {}
    from inference.duration.evaluate import data_end

    end = data_end(runs) or 0.0
    late = [r for r in runs if r.submit >= cut and r.ended is None]
    elapsed = [end - r.started for r in late if r.started is not None]
    return {"started": len(elapsed), "never_started": len(late) - len(elapsed),
            "median_elapsed_s": float(np.median(elapsed)) if elapsed else 0.0}


def run_duration_bench(*, traces: Sequence[str], encoders: Sequence[str], train_fraction: float = 0.75,
                       path: Path | None = None, limit: int | None = None, save_dir: Path | None = None,
                       epochs: int = 80, out_dir: Path = Path("reports"), command: str = "",
                       censored: bool = True) -> int:  # fmt: skip
    started = time.perf_counter()
    import torch

    torch.set_num_threads(2)  # the machine's share; the MLP is small
    report = Report(out_dir, "bench-duration", "Duration prediction on held-out jobs", command, console=console,
                    started=started)  # fmt: skip
    report.text(
        f"Per trace, jobs with a run time split by submission time: the first {train_fraction:.0%} are the "
        "training period (a model is trained on the jobs that had *finished* by the cut), the rest are held out "
        "and predicted online at their submission, after observing every job finished by then. Relative error = "
        "|pred − true| / max(true, 1 s). `within_100pct` is the issue's figure (target 85.7 %); it only bounds "
        "over-prediction (any pred ≤ true passes; predicting 0 s would score 100 %), hence `within_2x` "
        "(max(pred/true, true/pred) ≤ 2) and `mae_log` (mean |ln pred − ln true|) beside it. `history` = the "
        "online median baseline of `sjf-predicted`; `constant` = the training median; `pair` = the two-way blend of "
        "regression and retrieval; `blend` = the model's answer, `pair` mixed with the history of the job's most "
        "specific exact key (same request, app or program) by the weight its validation split chose. "
        + ("The regression also learns from the jobs still running at the cut, as lower bounds on their run "
           "time (censored loss)." if censored else "Jobs still running at the cut are not learned from "
           "(--no-censored)."))  # fmt: skip
    all_rows: list[dict[str, Any]] = []
    for trace in traces:
        try:
            result = evaluate_trace(trace, encoders, train_fraction=train_fraction, path=path, limit=limit,
                                    save_dir=save_dir, epochs=epochs, censored=censored)  # fmt: skip
        except (ValueError, OSError) as e:
            console.print(f"[red]{trace}: {escape(str(e))}")
            return 2
        report.table(f"{trace}: held-out accuracy", result["rows"], COLUMNS)
        if (unscored := result["split"]["unscored_held_out"]) and (unscored["started"] or unscored["never_started"]):
            report.text(f"{trace}: the rows score only held-out jobs that finished within the trace. Not scored: "
                        f"{unscored['started']:,} that started and had not ended by its end (median "
                        f"{unscored['median_elapsed_s']:,.0f} s run by then, a lower bound on their run time) and "
                        f"{unscored['never_started']:,} that never started.")  # fmt: skip
        report.cdf_plot(f"{trace}-rel-err", f"{trace}: relative error on held-out jobs (clipped at 10)",
                        "|pred − true| / true", result["errors"])  # fmt: skip
        report.data(trace, {"rows": result["rows"], "split": result["split"], "trained": result["trained"],
                            "censored": censored})  # fmt: skip
        all_rows += result["rows"]
    best = [r for r in all_rows if r["predictor"] == "blend"]
    if best:
        met = ", ".join(f"{r['trace']}/{r['encoder']} {r['within_100pct']:.1%}" for r in best)
        report.text(f"Blend within 100 % relative error (target {TARGET:.1%}): {met}.")
    report.data("rows", all_rows)
    for p in report.write():
        console.print(f"wrote {p}")
    return 0
