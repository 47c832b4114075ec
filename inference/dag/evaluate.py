"""Evaluate the learned DAG policy beside HEFT and CPOP: makespan, speedup and SLR on the
held-out random DAGs (``scheduling.dag.held_out_dags``, as ``semsched bench dag`` draws them).
The WfInstances workflows and the Topcuoglu graph are ``semsched bench dag --schedulers
heft,cpop,learned,learned-sample`` (ops/ loads those files; inference/ stays below ops/).

Every schedule passes ``scheduling.dag.check_schedule`` or the evaluation stops::

    .venv/bin/python -m inference.dag.evaluate --dags 100 --seed 0

:func:`evaluate_problems` depends only on ``scheduling``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import typer
from rich.console import Console
from rich.table import Table

import inference.dag  # noqa: F401 - registers "learned" and "learned-sample"
from inference.dag.dataset import progress
from scheduling.dag import DagGeneratorConfig, DagProblem, check_schedule, held_out_dags
from scheduling.dag.schedulers import get_own_dag_scheduler
from scheduling.metrics.dag import dag_metrics

DEFAULT_SCHEDULERS = ("heft", "cpop", "learned", "learned-sample")


@dataclass(frozen=True)
class SetResult:
    """One set of problems: per scheduler, per problem makespan / speedup / SLR, and seconds."""

    name: str
    metrics: dict[str, dict[str, list[float]]]

    def mean(self, scheduler: str, metric: str) -> float:
        return float(np.mean(self.metrics[scheduler][metric]))


def evaluate_problems(name: str, problems: list[DagProblem], schedulers: tuple[str, ...],
                      model_dir: Path | None = None, show: bool = True) -> SetResult:  # fmt: skip
    built = {s: get_own_dag_scheduler(s, **({"model_dir": model_dir} if s.startswith("learned") and model_dir else {}))
             for s in schedulers}  # fmt: skip  (a learned scheduler without its model: ValueError, not HEFT's numbers)
    out: dict[str, dict[str, list[float]]] = {s: {"makespan": [], "speedup": [], "slr": [], "seconds": []}
                                              for s in schedulers}  # fmt: skip
    with progress() as bar:
        job = bar.add_task(name, total=len(problems), info="", visible=show)
        for problem in problems:
            for s, scheduler in built.items():
                t0 = time.perf_counter()
                schedule = scheduler.schedule(problem)
                seconds = time.perf_counter() - t0
                errors = check_schedule(problem, schedule)
                if errors:
                    raise AssertionError(f"{s} made an invalid schedule for {problem.name}: {errors[:3]}")
                for k, v in dag_metrics(problem, schedule).as_dict().items():
                    out[s][k].append(v)
                out[s]["seconds"].append(seconds)
            bar.advance(job)
    return SetResult(name, out)


def print_table(results: list[SetResult], schedulers: tuple[str, ...], console: Console | None = None) -> None:
    table = Table(title="Learned DAG policy beside HEFT and CPOP (means; SLR vs heft = mean SLR / HEFT's - 1)")
    for col in ("set", "scheduler", "makespan", "speedup", "SLR", "SLR vs heft", "ms / DAG"):
        table.add_column(col, justify="left" if col in ("set", "scheduler") else "right")
    for r in results:
        heft = r.mean("heft", "slr") if "heft" in schedulers else None
        for s in schedulers:
            slr = r.mean(s, "slr")
            table.add_row(r.name, s, f"{r.mean(s, 'makespan'):.4g}", f"{r.mean(s, 'speedup'):.3f}", f"{slr:.4f}",
                          f"{slr / heft - 1:+.1%}" if heft else "", f"{1000 * r.mean(s, 'seconds'):.1f}")  # fmt: skip
        table.add_section()
    (console or Console(width=140)).print(table)


def main(dags: int = typer.Option(100), seed: int = typer.Option(0),
         model_dir: Path = typer.Option(None, help="default: $SEMSCHED_DAG_MODEL or models/dag/latest"),
         schedulers: str = typer.Option(",".join(DEFAULT_SCHEDULERS)),
         out: Path = typer.Option(None, help="also write the means as JSON here")) -> dict[str, object]:  # fmt: skip
    """Print the comparison table; returns {set name: {scheduler: {metric: mean}}}."""
    torch.set_num_threads(1)
    names = tuple(s for s in schedulers.split(",") if s)
    try:
        results = [evaluate_problems(f"held-out random ({dags}, seed {seed})",
                                     list(held_out_dags(DagGeneratorConfig(), dags, seed)), names, model_dir)]  # fmt: skip
    except ValueError as e:  # a learned scheduler without its model, a bad seed
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    print_table(results, names)
    means = {r.name: {s: {m: r.mean(s, m) for m in ("makespan", "speedup", "slr", "seconds")} for s in names}
             for r in results}  # fmt: skip
    if out is not None:
        out.write_text(json.dumps(means, indent=2))
    return means


if __name__ == "__main__":
    typer.run(main)
