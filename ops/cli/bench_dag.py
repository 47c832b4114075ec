"""The typer command behind ``semsched bench dag`` (wired into ``bench_app`` by ops/cli/bench.py)."""

from __future__ import annotations

from pathlib import Path

import typer


def dag(
    dags: int = typer.Option(100, help="Held-out random DAGs to schedule."),
    seed: int = typer.Option(0, help="Seed of the held-out DAG stream."),
    tasks_min: int = typer.Option(20, "--tasks-min", help="Fewest tasks of a random DAG."),
    tasks_max: int = typer.Option(150, "--tasks-max", help="Most tasks of a random DAG."),
    processors: int = typer.Option(4, help="Processors of the random DAGs' platform."),
    ccr: float = typer.Option(1.0, help="Communication-to-computation ratio of the random DAGs."),
    beta: float = typer.Option(0.5, help="Processor heterogeneity of the random DAGs (Topcuoglu's beta, 0..2)."),
    schedulers: str = typer.Option("heft,cpop,fifo", help="DAG schedulers, comma-separated (also learned, "
                                   "learned-sample, learned-rollout: the trained policy of inference/dag; "
                                   "learned-rollout is decision-time search, seconds per DAG)."),
    workflows: bool = typer.Option(True, help="Also the Topcuoglu graph and the WfInstances workflows."),
    out: Path = typer.Option(Path("reports"), help="Directory for bench-dag.md, bench-dag.json and the plots."),
) -> None:
    """HEFT, CPOP and FIFO on the Topcuoglu graph, the WfInstances workflows (beside their
    recorded makespan) and held-out random DAGs: makespan, speedup and SLR."""
    from ops.bench.dag import DagBenchOptions, run_dag_bench

    names = tuple(s.strip() for s in schedulers.split(",") if s.strip())
    if any(n.startswith("learned") for n in names):
        import inference.dag  # noqa: F401  (registers the learned DAG schedulers; loads torch)
    try:
        options = DagBenchOptions(dags=dags, seed=seed, tasks_min=tasks_min, tasks_max=tasks_max,
                                  processors=processors, ccr=ccr, beta=beta, schedulers=names,
                                  workflows=workflows)  # fmt: skip
    except (ValueError, LookupError) as e:
        raise typer.BadParameter(str(e)) from None
    command = (f"semsched bench dag --dags {dags} --seed {seed} --tasks-min {tasks_min} --tasks-max {tasks_max} "
               f"--processors {processors} --ccr {ccr:g} --beta {beta:g} --schedulers {','.join(names)}"
               f"{'' if workflows else ' --no-workflows'} --out {out}")  # fmt: skip
    raise typer.Exit(run_dag_bench(options, out, command))
