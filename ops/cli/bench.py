"""``semsched bench …``: benchmarks that print numbers (never timed tests)."""

from __future__ import annotations

from pathlib import Path

import typer

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers.")


@bench_app.command("pipeline")
def pipeline(
    jobs: int = typer.Option(2000, help="Submissions to push through the pipeline (openb pods, cycled)."),
    port: int = typer.Option(0, help="Kafka port (0 = a free one)."),
    policy: str = typer.Option("best-fit", help="Scheduling policy."),
    step: float = typer.Option(None, help="Seconds between scheduling steps (default: the worker's, 1 s)."),
    rate: float = typer.Option(0.0, help="Submissions per second (0 = as fast as the producer goes: a burst)."),
    timeout: float = typer.Option(900, help="Give up after this many seconds of waiting for the jobs."),
    out: Path = typer.Option(Path("reports/bench-pipeline.json"), help="JSON result file."),
) -> None:
    """Sustained events/s through ingest → decision → command → archive on the local broker,
    and submission → command latency p50 / p99."""
    from ops.bench.pipeline import run_pipeline_bench
    from ops.cli.options import policy_names

    policy_names(policy)

    raise typer.Exit(
        run_pipeline_bench(jobs=jobs, port=port, policy=policy, step=step, rate=rate, timeout_s=timeout, out=out)
    )


@bench_app.command("step")
def step(
    pending: str = typer.Option("64,256,1024", help="Pending-queue sizes, comma-separated."),
    policies: str = typer.Option("", help="Policies, comma-separated (default: every registered one)."),
    repeat: int = typer.Option(7, help="Timed steps per (policy, size), after one warm-up step."),
    out: Path = typer.Option(Path("reports/bench-step.json"), help="JSON result file."),
) -> None:
    """In-process compute time of one scheduling step (scheduling.assign.schedule_step) for N
    pending openb pods on the 1,213 openb GPU nodes, per policy."""
    from ops.bench.step import parse_sizes, run_step_bench

    try:
        sizes = parse_sizes(pending)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    from ops.cli.options import policy_names

    names = policy_names(policies)
    raise typer.Exit(run_step_bench(pending=sizes, policies=names, repeat=repeat, out=out))


@bench_app.command("fill")
def fill(
    pods: Path = typer.Option(None, help="A pod list in the openb format (default: the shared default list)."),
    nodes: Path = typer.Option(None, help="A node list in the openb format (default: the 1,213 GPU nodes)."),
    policies: str = typer.Option("", help="Policies, comma-separated (default: every registered one)."),
    seeds: str = typer.Option("42-51", help="Seeds: a range 'a-b' or a comma-separated list."),
    out: Path = typer.Option(Path("reports"), help="Directory for bench-fill.json and bench-fill.md."),
) -> None:
    """The openb fill benchmark (FGD's method): pods arrive until 130% of the GPU capacity,
    none departs; GPU allocated at 100% arrived demand per policy, beside the published figures."""
    from ops.bench.fill import run_fill_bench
    from ops.cli.options import policy_names, seed_list

    raise typer.Exit(run_fill_bench(pods=pods, nodes=nodes, policies=policy_names(policies),
                                    seeds=seed_list(seeds), out_dir=out))  # fmt: skip
