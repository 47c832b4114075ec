"""``semsched bench triton``."""

from __future__ import annotations

from pathlib import Path

import typer

from ops.bench import invoked_command
from ops.cli.options import report_dir


def triton(
    model: Path = typer.Option(None, help="Model directory (default: $SEMSCHED_MODEL_DIR, else models/latest)."),
    url: str = typer.Option(None, help="gRPC host:port of a running Triton (`semsched serve`); default: start one."),
    pending: str = typer.Option("64,256,1024", help="Pending-queue sizes, comma-separated."),
    nodes: str = typer.Option("1213,5000", help="Cluster sizes (1,213 = openb; more = its nodes replicated)."),
    repeat: int = typer.Option(20, min=1, help="Timed steps per size (after one warm-up)."),
    churn: int = typer.Option(16, min=0, help="Placements, arrivals and departures between consecutive steps "
                              "(both sides keep their pair features from step to step)."),
    deadline_ms: float | None = typer.Option(None, help="Count the Triton calls slower than this (default: the worker's "
                                      "deadline, $SEMSCHED_TRITON_DEADLINE_MS, else 500)."),  # fmt: skip
    burst: int = typer.Option(0, min=0, help="Also time a worker's step with this many jobs pending at once, on the "
                              "1,213 openb nodes, with the worker's step deadline and without (0: skip)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-triton.md/.json and plots."),
) -> None:
    """Decision latency per scheduling step (p50 / p99) via Triton (gRPC) beside in-process."""

    from ops.bench.step import parse_sizes
    from ops.bench.triton import run_triton_bench

    try:
        sizes, node_counts = parse_sizes(pending), parse_sizes(nodes, "--nodes")
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    from ops.processes import sigterm_as_interrupt

    with sigterm_as_interrupt():  # a `kill` stops the server this run started (its finally), as Ctrl-C does
        code = run_triton_bench(model_dir=model, url=url, pending=sizes, nodes=node_counts, repeat=repeat,
                                deadline_ms=deadline_ms, out_dir=out, churn=churn, burst=burst,
                                command=invoked_command())  # fmt: skip
    raise typer.Exit(code)
