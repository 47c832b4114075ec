"""``semsched train-duration``: train the learned duration predictor on a trace and publish it.

The trace's jobs with a run time are split in time like the held-out benchmark
(:func:`inference.duration.evaluate.time_split`): with ``--train-fraction f < 1`` the model
learns only from the jobs submitted in the first ``f`` of the trace (by count) *and finished by
that cut* — what a model trained at that moment could have known — so the later part stays
held out for ``semsched bench duration`` and ``semsched bench sjf``; ``--train-fraction 1``
uses every job with a run time. Jobs submitted before the cut and still running at it are
learned from as lower bounds on their run time (a censored loss, ``--no-censored`` to drop them
as before: a model trained at a cut would otherwise only see jobs short enough to have
finished). The model is written to ``<out>/<version>/``
(:func:`inference.duration.io.save_predictor`) and ``<out>/latest`` is repointed at it
atomically (:func:`inference.duration.io.point_latest`, i.e. :func:`inference.model.io.point_latest`).

``--trace archive`` learns from the ClickHouse archive's finished jobs instead
(:func:`storage.queries.finished_jobs.finished_jobs`: the run time of each job's last finished
attempt, read through a running worker's ``/sql`` when one answers, else ``--archive DSN`` /
``Settings().clickhouse_dsn``), split in time the same way; the attempts running at the cut
come from :func:`storage.queries.job_runs.job_runs`.

``sjf-learned`` (``SEMSCHED_POLICY=sjf-learned+best-fit``) loads ``models/duration/latest``
(or ``$SEMSCHED_DURATION_MODEL_DIR``) when the worker starts.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.cli.options import encoder_names
from ops.console import print_json_line, wide_console
from ops.traces.base import TraceLineError

console = wide_console()
TRACES = ("google2011", "dlrm2025", "openb", "archive")
ENCODERS = ("hashed", "minilm")


def default_version(trace: str, encoder: str, train_fraction: float) -> str:
    """``<trace>-<encoder>-f<percent>-<UTC time>``, e.g. ``openb-hashed-f75-20261122T061500Z``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{trace}-{encoder}-f{round(train_fraction * 100)}-{stamp}"


def training_records(records: list[Any], train_fraction: float,
                     runs: list[Any] | None = None) -> tuple[list[Any], list[Any], dict[str, Any]]:  # fmt: skip
    """The records a model trained at the ``train_fraction`` cut may learn from, the jobs still
    running at the cut (``(job, started, elapsed)``: lower bounds; from ``runs`` when the source says
    when its jobs ran, see :func:`~inference.duration.evaluate.running_at_cut`), and the split's facts."""
    from inference.duration.evaluate import Split, data_end, running_at_cut, time_split

    if train_fraction >= 1.0:  # every job; the ones still running at the end of the data are lower bounds too (found
        # by review: none were, so the model trained to deploy was not the recipe measured: Google 82.9 % without)
        train = sorted(records, key=lambda r: r.submit)
        end = data_end(runs or (), records)
        running = running_at_cut(Split(cut=end, train=train, late=[], test=[]), runs) if runs and end else []
        return train, running, {"train_fraction": 1.0, "cut_s": None, "end_s": end, "running": len(running),
                                "train": len(records), "late": 0, "held_out": 0}  # fmt: skip
    split = time_split(records, train_fraction)
    running = running_at_cut(split, runs)
    return split.train, running, {"train_fraction": train_fraction, "cut_s": split.cut, "running": len(running),
                                                "train": len(split.train), "late": len(split.late),
                                                "held_out": len(split.test)}  # fmt: skip


def archive_finished(archive: str | None, limit: int | None = None) -> tuple[list[Any], float | None]:
    """The archive's finished jobs as :class:`~inference.duration.evaluate.Finished` records, and the
    latest finish among them (epoch s; a worker's warm-up tells by it which jobs a model trained on
    them holds: :func:`inference.duration.archive.trained_on`)."""
    from inference.duration.archive import as_records
    from ops.cli.models import archive_client
    from storage.queries.finished_jobs import finished_jobs

    rows = finished_jobs(archive_client(archive, write=False))
    rows = rows if limit is None else rows[:limit]
    return as_records(rows), max((f.finish_s for f in rows), default=None)


def archive_runs(archive: str | None) -> list[Any]:
    """Every attempt in the archive that started, as :class:`~inference.duration.evaluate.Run` records:
    the jobs running at the cut are learned as lower bounds (not those that finish later: future
    information, found by review)."""
    from inference.duration.archive import as_runs
    from ops.cli.models import archive_client
    from storage.queries.job_runs import job_runs

    return as_runs(job_runs(archive_client(archive, write=False)))


def run_train_duration(*, trace: str, encoder: str = "hashed", train_fraction: float = 0.75,
                       out: Path = Path("models/duration"), version: str | None = None, epochs: int = 80,
                       limit: int | None = None, path: Path | None = None, text_dim: int = 64,
                       seed: int = 0, quiet: bool = False, censored: bool = True,
                       archive: str | None = None) -> Path:  # fmt: skip
    """Load, split, train, save, repoint ``latest``; returns the version directory."""
    import torch

    from inference.duration.config import DurationConfig
    from inference.duration.io import point_latest, save_predictor
    from inference.duration.predictor import make_encoder
    from inference.duration.train import train_predictor
    from ops.bench.duration import load_records

    if trace not in TRACES:
        raise typer.BadParameter(f"--trace must be one of {', '.join(TRACES)}, not {trace!r}")
    if encoder not in ENCODERS:
        raise typer.BadParameter(f"--encoder must be one of {', '.join(ENCODERS)}, not {encoder!r}")
    if not 0 < train_fraction <= 1:
        raise typer.BadParameter("--train-fraction must be within (0, 1]")
    torch.set_num_threads(1)  # a small MLP on a shared 2-core machine
    started = time.perf_counter()
    version = version or default_version(trace, encoder, train_fraction)
    with console.status(f"loading {trace}…"):
        finished_through = None
        if trace == "archive":
            (records, finished_through), runs = archive_finished(archive, limit), archive_runs(archive)
        else:
            records, runs = load_records(trace, path, limit)
    train, running, facts = training_records(records, train_fraction, runs)
    if trace == "archive":
        facts["finished_through_s"] = finished_through
    console.print(f"[bold]{trace}[/]: {len(records):,} jobs with a run time; training on {len(train):,}"
                  + (f" (submitted before {facts['cut_s']:,.0f} s and finished by then; {facts['held_out']:,} "
                     f"held out after the cut)" if facts["cut_s"] is not None else ""))  # fmt: skip
    config = DurationConfig(version=version, epochs=epochs, seed=seed)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=quiet) as bar:  # fmt: skip
        task = bar.add_task(f"{encoder}: encoding texts", total=None)

        def step(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"{encoder}: {stage}", completed=done, total=total)

        enc = make_encoder(encoder, text_dim)
        model = train_predictor([r.job for r in train], [r.duration for r in train], config,
                                submit_times=[r.submit for r in train], finish_times=[r.finish for r in train],
                                encoder=enc, progress=step,
                                running=running if censored else None)  # fmt: skip
    model.config.train_info.update({"trace": trace, "limit": limit, **facts})
    out = Path(out)
    directory = save_predictor(out / version, model)
    point_latest(out, version)
    info = model.config.train_info
    summary = {"version": version, "jobs": len(train), "val_mae_log": info.get("val_mae_log"),
               "chosen": info.get("chosen"),
               "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    print_json_line(summary)
    console.print(f"wrote {directory}; {out / 'latest'} → {version} "
                  f"(serve it with SEMSCHED_POLICY=sjf-learned+best-fit)")  # fmt: skip
    return directory


def train_duration(
    trace: str = typer.Option(..., help="Trace to learn from: google2011, dlrm2025, openb, or archive (the "
                                        "ClickHouse archive's finished jobs)."),
    encoder: str = typer.Option("hashed", help="Text encoder: hashed (n-grams, fast) or minilm (all-MiniLM-L6-v2).", callback=encoder_names),
    train_fraction: float = typer.Option(0.75, help="Learn from the jobs submitted in this first share of the "
                                                    "trace and finished by its cut (1 = every job)."),
    out: Path = typer.Option(Path("models/duration"), help="Model root: writes <out>/<version>/ and <out>/latest."),
    version: str = typer.Option(None, help="Version name (default <trace>-<encoder>-f<percent>-<UTC time>)."),
    epochs: int = typer.Option(80, min=1, help="Maximum MLP epochs (early stopping on a time-ordered validation split)."),
    limit: int = typer.Option(None, min=0, help="Read only the first N jobs of the trace (a quick run)."),
    path: Path = typer.Option(None, help="Trace file or directory (default: the shared data)."),
    seed: int = typer.Option(0, help="Seed of the MLP's initialisation and batches."),
    censored: bool = typer.Option(True, help="Also learn from the jobs still running at the cut, as lower bounds "
                                             "on their run time (censored loss)."),
    archive: str = typer.Option(None, help="With --trace archive: the archive DSN (default: a running worker's "
                                           "/sql, else SEMSCHED_CLICKHOUSE_URL or the embedded chdb)."),
) -> None:
    """Train the learned duration predictor (regression + retrieval) on a trace and publish it."""
    from ops.cli.options import check_new_version

    check_new_version(out, version)
    try:
        run_train_duration(trace=trace, encoder=encoder, train_fraction=train_fraction, out=out, version=version,
                           epochs=epochs, limit=limit, path=path, seed=seed, censored=censored,
                           archive=archive)  # fmt: skip
    except TraceLineError as e:  # a bad line of the trace: exit 1, as replay, bench and train (found by review: 2)
        from ops.bench.simulation import load_error

        raise typer.Exit(load_error(console, e)) from None
    except (ValueError, OSError) as e:
        where = str(path) if path is not None else trace
        said = str(e) if where in str(e) else f"{where}: {e}"  # (the trace it read: not named by every error)
        console.print(f"[red]{escape(said)}")
        raise typer.Exit(2) from None
