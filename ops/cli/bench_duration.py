"""``semsched bench duration`` (typer command function; the lead wires it into ``bench_app``)."""

from __future__ import annotations

from pathlib import Path

import typer


def duration(
    traces: str = typer.Option("dlrm2025,google2011,openb", help="Traces, comma-separated (semsched replay names)."),
    encoders: str = typer.Option("hashed,minilm", help="Text encoders, comma-separated: hashed, minilm."),
    train_fraction: float = typer.Option(0.75, help="Share of the jobs (by submission time) in the training period."),
    limit: int = typer.Option(None, help="Read only the first N jobs of each trace (a quick run)."),
    epochs: int = typer.Option(80, help="Maximum MLP epochs (early stopping on the validation split)."),
    save: Path = typer.Option(None, help="Also save each trained model to SAVE/<trace>-<encoder>."),
    out: Path = typer.Option(Path("reports"), help="Directory for bench-duration.md/.json and the plots."),
) -> None:
    """Held-out accuracy of the duration predictors: history baseline, regression, retrieval, blend."""
    import sys

    from ops.bench.duration import run_duration_bench

    names = [t.strip() for t in traces.split(",") if t.strip()]
    encs = [e.strip() for e in encoders.split(",") if e.strip()]
    if not 0 < train_fraction < 1:
        raise typer.BadParameter("--train-fraction must be within (0, 1)")
    raise typer.Exit(run_duration_bench(traces=names, encoders=encs, train_fraction=train_fraction, limit=limit,
                                        save_dir=save, epochs=epochs, out_dir=out,
                                        command="semsched bench " + " ".join(sys.argv[2:])))  # fmt: skip
