"""The typer command behind ``semsched bench dag-bounds`` (wired into ``bench_app`` by ops/cli/bench.py)."""

from __future__ import annotations

from pathlib import Path

import typer

import ops.cli.dag_set_options as o
from ops.cli.bench_dag import workflow_errors_in_one_line
from ops.cli.options import positive, report_dir


def dag_bounds(
    dags: o.Dags = o.DAGS,
    seed: o.Seed = o.SEED,
    tasks_min: o.TasksMin = o.TASKS_MIN,
    tasks_max: o.TasksMax = o.TASKS_MAX,
    processors: o.Processors = o.PROCESSORS,
    ccr: o.Ccr = o.CCR,
    beta: o.Beta = o.BETA,
    time_limit: float = typer.Option(15.0, "--time-limit", callback=positive, help="CP-SAT seconds per DAG (wall clock)."),
    workers: int = typer.Option(4, help="CP-SAT worker threads."),
    workflows: bool = typer.Option(False, help="Also the WfInstances workflows of `bench dag` (both platforms)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-dag-bounds.md, .json and the plots."),
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
    command = (f"semsched bench dag-bounds {o.held_out_flags(dags, seed, tasks_min, tasks_max, processors, ccr, beta)} "
               f"--time-limit {time_limit:g} --workers {workers}{' --workflows' if workflows else ''} --out {out}")  # fmt: skip
    raise typer.Exit(workflow_errors_in_one_line(run_dag_bounds, options, out, command))
