"""``semsched train --from-archive``: retrain the learned scorer from what the archive recorded.

:func:`run_train_from_archive` is the plain function the ``train`` command calls when
``--from-archive`` is given. The archive is read through a running worker's
``/sql`` when one answers (embedded mode), else opened directly (``--archive DSN`` or
``Settings().clickhouse_dsn``); its events come from :func:`storage.queries.training_events.training_events`
and are folded by :func:`inference.training.archive_events.fold_events`; ``since`` reads a window (the jobs
over before it are not read). The new version is written to ``<out>/<version>/`` with
``source: archive``; ``latest`` moves only through promotion (``--promote``, or later
``semsched models promote``).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.console import print_json_line, wide_console

console = wide_console()
READ_TIMEOUT_S = 600.0  # reading the archive through a running worker's /sql


def run_train_from_archive(*, archive: str | None = None, out: Path = Path("models"), epochs: int = 12,
                           batch: int = 16, lr: float = 3e-3, hidden: int = 32, depth: int = 2, text_dim: int = 32,
                           head_hidden: int = 16, head_layers: int = 1, head_rank: int = 4, seed: int = 0, version: str | None = None,
                           max_samples: int | None = 2000, outcomes: str = "finished", policies: str | None = None,
                           tied_targets: bool = False, promote: bool = False, promotion_seeds: str = "100-104",
                           pod_sample: int | None = None, job_tokens: int = 0, target: str = "choice",
                           cluster_features: bool = True, frag_features: bool = True, cost_weight: float = 0.1,
                           transition_weight: float = 0.1, delta_weight: float = 0.0,
                           stability: float = 0.0, encoder: str = "hashed",
                           since: datetime | None = None) -> Path:  # fmt: skip
    import torch

    from inference.training import TrainOptions
    from inference.training.archive_events import fold_events
    from inference.training.archive_train import NothingToLearnError, train_from_archive
    from ops.cli.db import WorkerBusy
    from ops.cli.models import archive_client, archive_name, run_promote
    from ops.cli.options import seed_list
    from storage.queries.training_events import training_events

    torch.set_num_threads(1)
    client = archive_client(archive, write=False)
    if getattr(client, "kind", "") == "worker":  # the whole archive in one answer: more than a probe's 10 s
        client.timeout = READ_TIMEOUT_S
    with Progress(TextColumn("[bold]train from the archive"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[what]}"), TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("train", total=None, what="reading the archive, rebuilding the states")

        def on_batch(epoch: int, done: int, loss: float) -> None:
            bar.update(task, completed=done, what=f"epoch {epoch + 1}/{epochs} loss {loss:.3f}")

        try:
            events = fold_events(training_events(client, since=since))
        except WorkerBusy as e:  # (found by review: a traceback)
            bar.stop()
            console.print(f"[red]cannot read the archive: {escape(str(e))}[/red] (stop the worker, or point "
                          "--archive / SEMSCHED_CLICKHOUSE_URL at a ClickHouse server)")  # fmt: skip
            raise typer.Exit(1) from None
        try:
            directory = train_from_archive(
                events, out, options=TrainOptions(epochs=epochs, batch=batch, lr=lr, seed=seed, target=target,
                                                  cost_weight=cost_weight, transition_weight=transition_weight,
                                                  delta_weight=delta_weight), hidden=hidden,
                depth=depth, text_dim=text_dim, head_hidden=head_hidden, head_layers=head_layers, head_rank=head_rank,
                outcomes=[o.strip() for o in outcomes.split(",") if o.strip()],
                policies=None if not policies else [p.strip() for p in policies.split(",") if p.strip()],
                max_samples=max_samples, tied_targets=tied_targets, version=version, archive=archive_name(client),
                on_batch=on_batch, job_tokens=job_tokens, cluster=cluster_features, frag=frag_features,
                stability=stability, encoder=encoder, since=None if since is None else since.timestamp())  # fmt: skip
        except NothingToLearnError as e:
            bar.stop()
            console.print(f"[red]{escape(str(e))}[/red]")
            raise typer.Exit(1) from None
    info = json.loads((directory / "train.json").read_text())
    if info.get("warning"):
        console.print(f"[yellow]warning: {escape(info['warning'])}[/yellow]")
    history = info["history"]
    print_json_line({"reconstruction": info["reconstruction"], "train_states": info["train_states"],
                     "val_states": info["val_states"], "train_loss": history["loss"][-1],
                     "val_agreement": (history.get("val_agreement") or [None])[-1],
                     "seconds": round(info["total_seconds"], 1)})  # fmt: skip
    console.print(f"wrote {directory}")
    if promote:
        run_promote(directory, out, seeds=seed_list(promotion_seeds), pod_sample=pod_sample, archive=archive)
    return directory
