"""``semsched bench model-calls``."""

from __future__ import annotations

from pathlib import Path

import typer

from ops.bench import invoked_command
from ops.cli.options import positive, report_dir


def model_calls(
    trace: str = typer.Option("dlrm2025", help="Trace: openb, dlrm2025, google2011 or jsonl."),
    path: Path = typer.Option(None, help="Trace file (default: the shared copy; required for jsonl)."),
    policy: str = typer.Option("learned", help="A policy that places with the learned model ('<ordering>+learned' too)."),
    windows: str = typer.Option("256", help="Model windows (jobs per call; 0: the whole queue), comma-separated."),
    load: str = typer.Option("extreme", help="Load: native, low, medium, high, extreme or an arrival factor like 250x."),
    step: float = typer.Option(1.0, help="Scheduling step (virtual seconds).", callback=positive),
    limit: int = typer.Option(None, help="Only the first N jobs of the trace."),
    nodes: int = typer.Option(None, min=1, help="A seeded sample of N nodes."),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed (the node sample)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for the report and JSON."),
) -> None:
    """Replay a trace on the worker's path (ordered once, prepare_step, then the step) and count the
    learned policy's model calls: prepared, unused, and opened synchronously within a step."""

    from ops.bench.model_calls import run_model_calls_bench
    from ops.bench.step import parse_sizes
    from ops.cli.options import policy_names

    try:
        sizes = parse_sizes(windows, "--windows", minimum=0)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    names = policy_names(policy)
    if len(names) != 1:
        raise typer.BadParameter(f"--policy {policy!r}: expected one policy")
    raise typer.Exit(run_model_calls_bench(trace=trace, path=path, policy=names[0], windows=sizes, load=load, step=step,
                                           limit=limit, nodes=nodes, seed=seed, out_dir=out,
                                           command=invoked_command()))  # fmt: skip
