"""The typer command behind ``semsched bench dag-bounds`` (wired into ``bench_app`` by ops/cli/bench.py)."""

from __future__ import annotations

from pathlib import Path

import typer


def dag_bounds(
    dags: int = typer.Option(100, help="Held-out random DAGs (the first N of `bench dag`'s stream)."),
    seed: int = typer.Option(0, help="Seed of the held-out DAG stream (as `bench dag --seed`)."),
    tasks_min: int = typer.Option(20, "--tasks-min", help="Fewest tasks of a random DAG."),
    tasks_max: int = typer.Option(150, "--tasks-max", help="Most tasks of a random DAG."),
    processors: int = typer.Option(4, help="Processors of the random DAGs' platform."),
    ccr: float = typer.Option(1.0, help="Communication-to-computation ratio of the random DAGs."),
    beta: float = typer.Option(0.5, help="Processor heterogeneity of the random DAGs (Topcuoglu's beta, 0..2)."),
    time_limit: float = typer.Option(15.0, "--time-limit", help="CP-SAT seconds per DAG (wall clock)."),
    workers: int = typer.Option(4, help="CP-SAT worker threads."),
    workflows: bool = typer.Option(False, help="Also the WfInstances workflows of `bench dag` (both platforms)."),
    out: Path = typer.Option(Path("reports"), help="Directory for bench-dag-bounds.md, .json and the plots."),
) -> None:
    """HEFT against CP-SAT (OR-Tools) on the held-out random DAGs of `bench dag`: best
    makespan found, proven lower bound, share proved optimal, and the largest SLR improvement
    over HEFT any scheduler could reach."""
    from ops.bench.dag_bounds import DagBoundsOptions, run_dag_bounds

    try:
        options = DagBoundsOptions(dags=dags, seed=seed, tasks_min=tasks_min, tasks_max=tasks_max,
                                   processors=processors, ccr=ccr, beta=beta, time_limit_s=time_limit,
                                   workers=workers, workflows=workflows)  # fmt: skip
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    command = (f"semsched bench dag-bounds --dags {dags} --seed {seed} --tasks-min {tasks_min} "
               f"--tasks-max {tasks_max} --processors {processors} --ccr {ccr:g} --beta {beta:g} "
               f"--time-limit {time_limit:g} --workers {workers}{' --workflows' if workflows else ''} --out {out}")  # fmt: skip
    raise typer.Exit(run_dag_bounds(options, out, command))
