"""``semsched bench …``: benchmarks that print numbers (never timed tests)."""

from __future__ import annotations

import typer

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers.")


@bench_app.command("pipeline")
def pipeline(
    jobs: int = typer.Option(2000, help="Submissions to push through the pipeline."),
    port: int = typer.Option(0, help="Kafka port (0 = a free one)."),
    policy: str = typer.Option("best-fit", help="Scheduling policy."),
) -> None:
    """Sustained events/s through ingest → decision → command → archive on the local broker,
    and submission → command latency p50 / p99."""
    from ops.bench.pipeline import run_pipeline_bench

    raise typer.Exit(run_pipeline_bench(jobs=jobs, port=port, policy=policy))
