"""``semsched train-dag``: train the learned DAG scheduler (issue 4 point 7) and publish it.

Imitation of the rollout teacher on generated *training* DAGs (20–150 tasks), then optionally
DAgger and REINFORCE (:mod:`inference.dag.train`, where the recipe and its measurements are).
Writes ``<out>/<version>/`` (default: the repository's ``models/dag/vNNN``) and points
``<out>/latest`` at it: the ``learned``, ``learned-sample`` and ``learned-rollout(-wide)`` DAG schedulers
load ``models/dag/latest`` (or ``$SEMSCHED_DAG_MODEL``), and ``semsched bench dag`` compares
them with HEFT and CPOP on held-out DAGs. The teacher's labels are cached under
``<out>/cache`` (a second run with the same DAGs, seed and ``--k`` skips the teacher).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ops.cli.options import positive
from ops.console import wide_console

console = wide_console()


def train_dag(
    dags: int = typer.Option(80, min=1, help="Training DAGs the rollout teacher labels (imitation)."),
    k: int = typer.Option(3, min=1, help="Teacher: ready tasks of highest upward rank tried per step."),
    epochs: int = typer.Option(30, min=1, help="Imitation epochs."),
    dagger_dags: int = typer.Option(0, min=0, help="DAgger: training DAGs run by the student, labelled by the teacher."),
    rl_dags: int = typer.Option(0, min=0, help="REINFORCE updates after imitation (one fresh training DAG each)."),
    rl_samples: int = typer.Option(6, min=1, help="REINFORCE: sampled schedules per DAG (baseline: their mean)."),
    rl_lr: float = typer.Option(1e-4, callback=positive, help="REINFORCE learning rate (Adam)."),
    valid_dags: int = typer.Option(30, min=1, help="Validation DAGs (another training seed, never the held-out stream)."),
    init: Path = typer.Option(None, help="Start from this model directory (skips the teacher and imitation; needs --rl-dags)."),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed (training DAGs, initialisation, batches)."),
    hidden: int | None = typer.Option(None, min=4, help="Width of the two-stage policy network (default 64; with "
                                      "--init, the model's own)."),
    out: Path = typer.Option(None, help="Model root: writes <out>/<version>/ and points <out>/latest at it "
                             "(default: the repository's models/dag, where the DAG schedulers look)."),
    version: str = typer.Option("", help="Version name (default: the next vNNN)."),
) -> None:
    """Train the learned DAG scheduler (two stages: a ready task, then a processor) and publish it."""
    from inference.dag.train import MODELS, check_seed
    from inference.dag.train import train_dag as run
    from ops.cli.options import check_new_version

    check_new_version(out or MODELS, version)
    try:
        check_seed(seed)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--seed") from None
    if init is not None:
        from inference.dag.model import DagModelError, load_model

        try:
            width = load_model(init).config.hidden  # before the teacher's rollouts: a model that does not load is refused now
        except (FileNotFoundError, DagModelError) as e:
            raise typer.BadParameter(str(e), param_hint="--init") from None
        if hidden is not None and hidden != width:  # it trains the model it starts from, at its width
            raise typer.BadParameter(f"{hidden} is not the width of the --init model ({width}); leave it out",
                                     param_hint="--hidden")  # fmt: skip
        hidden = width
        if dagger_dags:  # (found by review: ignored without a word, and the model published)
            raise typer.BadParameter("DAgger follows imitation, which --init skips: leave it out (or leave out --init)",
                                     param_hint="--dagger-dags")  # fmt: skip
        if not rl_dags:
            raise typer.BadParameter("--init trains by REINFORCE alone: without --rl-dags it would publish the same "
                                     "model as a new version", param_hint="--rl-dags")  # fmt: skip
    meta = run(dags=dags, k=k, epochs=epochs, dagger_dags=dagger_dags, rl_dags=rl_dags, rl_samples=rl_samples,
               rl_lr=rl_lr, valid_dags=valid_dags, init=init, seed=seed, hidden=hidden or 64, out=out or MODELS,
               version=version)  # fmt: skip
    final = meta["rl"].get("valid_vs_heft", meta["imitation_valid_vs_heft"])
    start = (f"the teacher {meta['teacher_vs_heft']:.4f} on the training DAGs, the greedy policy "
             f"{meta['imitation_valid_vs_heft']:.4f} on the validation DAGs after imitation" if init is None else
             f"the greedy policy {meta['imitation_valid_vs_heft']:.4f} on the validation DAGs from {init}")  # fmt: skip
    console.print(f"wrote {meta['directory']} (latest -> {meta['version']}); makespan / HEFT's: {start}, "
                  f"{final:.4f} at the end; {meta['train_seconds']:.0f} s")  # fmt: skip
