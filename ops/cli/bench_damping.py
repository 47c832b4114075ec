"""``semsched bench damping``."""

from __future__ import annotations

from pathlib import Path

import typer

from ops.bench import invoked_command
from ops.cli.options import report_dir


def damping(
    stabilities: str = typer.Option("0,0.5", help="The models' stability values, comma-separated."),
    pending: int = typer.Option(256, min=1, help="Pending pods per step."),
    repeat: int = typer.Option(30, min=1, help="Timed consecutive steps per model."),
    hidden: int = typer.Option(32, min=4, help="The models' width."),
    pods: Path = typer.Option(None, help="openb-format pod list (default: the shared data)."),
    nodes: Path = typer.Option(None, help="openb-format node list (default: the shared data)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-damping.md/.json."),
) -> None:
    """What churn damping (score − stability · Δ) costs per model step, in-process on CPU."""
    import math

    from ops.bench.damping import run_damping_bench

    try:
        values = [float(x) for x in stabilities.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"--stabilities must be numbers, not {stabilities!r}") from None
    if not values or any(not math.isfinite(v) or v < 0 for v in values):
        raise typer.BadParameter(f"--stabilities must be finite numbers >= 0, not {stabilities!r}")
    raise typer.Exit(run_damping_bench(stabilities=values, pending=pending, repeat=repeat, hidden=hidden, out_dir=out,
                                       command=invoked_command(), pods=pods, nodes=nodes))  # fmt: skip
