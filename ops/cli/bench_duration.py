"""``semsched bench duration``."""

from __future__ import annotations

from pathlib import Path

import typer

from ops.bench import invoked_command
from ops.cli.options import encoder_names, positive, report_dir


def duration(
    traces: str = typer.Option("dlrm2025,google2011,openb", help="Traces, comma-separated (semsched replay names)."),
    encoders: str = typer.Option("hashed,minilm", help="Text encoders, comma-separated: hashed, minilm.", callback=encoder_names),
    train_fraction: float = typer.Option(0.75, help="Share of the jobs (by submission time) in the training period."),
    limit: int = typer.Option(None, help="Read only the first N jobs of each trace (a quick run)."),
    epochs: int = typer.Option(80, min=1, help="Maximum MLP epochs (early stopping on the validation split)."),
    save: Path = typer.Option(None, help="Also save each trained model to SAVE/<trace>-<encoder>."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-duration.md/.json and the plots."),
    censored: bool = typer.Option(True, help="Also learn from the jobs still running at the cut, as lower bounds "
                                             "on their run time (censored loss)."),
) -> None:
    """Held-out accuracy of the duration predictors: history baseline, regression, retrieval, blend."""

    from ops.bench.duration import run_duration_bench

    names = [t.strip() for t in traces.split(",") if t.strip()]
    encs = [e.strip() for e in encoders.split(",") if e.strip()]
    if not 0 < train_fraction < 1:
        raise typer.BadParameter("--train-fraction must be within (0, 1)")
    if not names or not encs:
        raise typer.BadParameter("--traces and --encoders need at least one name each")
    raise typer.Exit(run_duration_bench(traces=names, encoders=encs, train_fraction=train_fraction, limit=limit,
                                        save_dir=save, epochs=epochs, out_dir=out, censored=censored,
                                        command=invoked_command()))  # fmt: skip


def sjf(
    trace: str = typer.Option("openb", help="Trace to replay: openb or google2011 (semsched replay names)."),
    placement: str = typer.Option(None, help="Placement under every ordering (default: openb fgd, else best-fit)."),
    train_fraction: float = typer.Option(0.75, help="Share of the jobs (by submission time) before the cut: the "
                                                    "models learn from them, only later jobs are replayed."),
    held_out_jobs: int = typer.Option(None, min=1, help="Replay only the first N held-out jobs (a quicker run)."),
    load: str = typer.Option("extreme", help="Load planned on the held-out part: native, low … extreme, or 250x."),
    step: float = typer.Option(1.0, help="Scheduling step, seconds.", callback=positive),
    nodes: int = typer.Option(None, min=1, help="Seeded sample of this many nodes (Google 2011: 800)."),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed (node sample, node speeds)."),
    limit: int = typer.Option(None, help="Read only the first N jobs of the trace."),
    encoder: str = typer.Option("hashed", help="Text encoder of the duration model: hashed or minilm.", callback=encoder_names),
    epochs: int = typer.Option(80, min=1, help="Maximum MLP epochs."),
    policies: str = typer.Option(None, help="Override the policies (comma-separated, <ordering>+<placement>)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-sjf-<trace>.md/.json and the plots."),
    censored: bool = typer.Option(True, help="The duration model also learns from the jobs still running at the "
                                             "cut (lower bounds)."),
) -> None:
    """Held-out replay: sjf-learned vs sjf-predicted, las, fifo and sjf-oracle on one placement (JCT, queueing)."""

    from ops.bench.duration_replay import run_sjf_bench
    from ops.cli.options import policy_names

    if not 0 < train_fraction < 1:
        raise typer.BadParameter("--train-fraction must be within (0, 1)")
    names = policy_names(policies) if policies else None
    if placement is not None:
        policy_names(placement)
    raise typer.Exit(run_sjf_bench(trace=trace, placement=placement, train_fraction=train_fraction,
                                   held_out_jobs=held_out_jobs, load=load, step=step, nodes=nodes, seed=seed,
                                   limit=limit, encoder=encoder, epochs=epochs, policies=names, out_dir=out,
                                   censored=censored,
                                   command=invoked_command()))  # fmt: skip
