"""``semsched bench learned``."""

from __future__ import annotations

from pathlib import Path

import typer

from ops.bench import invoked_command
from ops.cli.options import report_dir


def learned(
    model: Path = typer.Option(None, help="Model directory (default: $SEMSCHED_MODEL_DIR, else models/latest)."),
    pending: str = typer.Option("64,256,1024", help="Pending-queue sizes, comma-separated."),
    repeat: int = typer.Option(30, min=1, help="Timed model steps per size (after one warm-up)."),
    compare: str = typer.Option("fgd,best-fit", help="Policies whose schedule_step time is shown beside."),
    churn: int = typer.Option(16, min=0, help="Placements, arrivals and departures between the consecutive "
                              "steps of the 'churned' rows (pair features kept across steps); 0: no such rows."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-learned.md/.json."),
) -> None:
    """Decision latency of the learned scorer per scheduling step (p50 / p99), in-process on CPU."""

    from ops.bench.learned import run_learned_bench
    from ops.bench.step import parse_sizes
    from ops.cli.options import policy_names

    try:
        sizes = parse_sizes(pending)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    names = policy_names(compare) if compare.strip() else []  # an unknown one stops here, not after the timings
    raise typer.Exit(run_learned_bench(model_dir=model, pending=sizes, repeat=repeat, compare=names, out_dir=out, churn=churn,
                                       command=invoked_command()))  # fmt: skip
