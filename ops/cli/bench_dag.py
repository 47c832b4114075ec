"""The typer command behind ``semsched bench dag`` (wired into ``bench_app`` by ops/cli/bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

import ops.cli.dag_set_options as o
from ops.cli.options import report_dir


def dag(
    dags: o.Dags = o.DAGS,
    seed: o.Seed = o.SEED,
    tasks_min: o.TasksMin = o.TASKS_MIN,
    tasks_max: o.TasksMax = o.TASKS_MAX,
    processors: o.Processors = o.PROCESSORS,
    ccr: o.Ccr = o.CCR,
    beta: o.Beta = o.BETA,
    schedulers: str = typer.Option("heft,cpop,fifo", help="DAG schedulers, comma-separated (also heft-rollout, "
                                   "a rollout over HEFT with no model, and learned, learned-sample, learned-rollout, "
                                   "learned-rollout-wide: the trained policy of inference/dag, `semsched train-dag`; "
                                   "the rollouts are decision-time search, seconds per DAG)."),
    workflows: bool = typer.Option(True, help="Also the Topcuoglu graph and the WfInstances workflows."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-dag.md, bench-dag.json and the plots."),
) -> None:
    """HEFT, CPOP and FIFO on the Topcuoglu graph, the WfInstances workflows (beside their
    recorded makespan) and held-out random DAGs: makespan, speedup and SLR."""
    from ops.bench.dag import DagBenchOptions, run_dag_bench

    names = tuple(dict.fromkeys(s.strip() for s in schedulers.split(",") if s.strip()))  # (heft,heft: one row)
    if not names:
        raise typer.BadParameter("--schedulers needs at least one scheduler")
    if any(n.startswith("learned") for n in names):
        import inference.dag  # noqa: F401  (registers the learned DAG schedulers; loads torch)
    try:
        options = DagBenchOptions(dags=dags, seed=seed, tasks_min=tasks_min, tasks_max=tasks_max,
                                  processors=processors, ccr=ccr, beta=beta, schedulers=names,
                                  workflows=workflows)  # fmt: skip
    except (ValueError, LookupError) as e:
        raise typer.BadParameter(str(e)) from None
    command = (f"semsched bench dag {o.held_out_flags(dags, seed, tasks_min, tasks_max, processors, ccr, beta)} "
               f"--schedulers {','.join(names)}{'' if workflows else ' --no-workflows'} --out {out}")  # fmt: skip
    raise typer.Exit(workflow_errors_in_one_line(run_dag_bench, options, out, command))


def workflow_errors_in_one_line(run: Any, *args: Any) -> int:
    """``run(*args)``'s exit code; a bad workflow file is one line naming it and why, exit 1."""
    from ops.workflows import WorkflowFormatError

    try:
        return int(run(*args))
    except WorkflowFormatError as e:
        typer.echo(f"error: {e}", err=True)
        return 1
