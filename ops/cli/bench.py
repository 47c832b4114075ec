"""``semsched bench …``: benchmarks that print numbers (never timed tests)."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from ops.bench import invoked_command
from ops.cli.options import positive, report_dir, result_file

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers.")


@bench_app.command("pipeline")
def pipeline(
    jobs: int = typer.Option(2000, min=1, help="Submissions to push through the pipeline (openb pods, cycled)."),
    port: int = typer.Option(0, min=0, max=65535, help="Kafka port (0 = a free one)."),
    policy: str = typer.Option("best-fit", help="Scheduling policy."),
    step: float = typer.Option(None, help="Seconds between scheduling steps (default: the worker's, 1 s).",
                               callback=positive),
    rate: float = typer.Option(0.0, help="Submissions per second (0 = as fast as the producer goes: a burst).", min=0.0),
    timeout: float = typer.Option(900, help="Give up after this many seconds of waiting for the jobs."),
    out: Path = typer.Option(Path("reports/bench-pipeline.json"), help="JSON result file.", callback=result_file),
) -> None:
    """Sustained events/s through ingest → decision → command → archive on the local broker,
    and submission → command latency p50 / p99."""
    from ops.bench.pipeline import run_pipeline_bench
    from ops.cli.options import policy_names

    policy_names(policy)

    raise typer.Exit(
        run_pipeline_bench(jobs=jobs, port=port, policy=policy, step=step, rate=rate, timeout_s=timeout, out=out)
    )


def _defaulted(text: str, names: list[str]) -> list[str]:
    """``names``; when they are the default list (``text`` empty), without the learned policies if
    their model does not load, with a note (named explicitly, the benchmark refuses them instead)."""
    from inference.policy import uses_learned
    from ops.bench.model_check import learned_version

    _, why = learned_version(names) if not text.strip() else (None, None)
    if not why:
        return names
    typer.echo(f"leaving out {', '.join(n for n in names if uses_learned(n))}: {why}", err=True)
    return [n for n in names if not uses_learned(n)]


@bench_app.command("step")
def step(
    pending: str = typer.Option("64,256,1024", help="Pending-queue sizes, comma-separated."),
    policies: str = typer.Option("", help="Policies, comma-separated (default: every registered one)."),
    repeat: int = typer.Option(7, min=1, help="Timed steps per (policy, size), after one warm-up step."),
    out: Path = typer.Option(Path("reports/bench-step.json"), help="JSON result file.", callback=result_file),
) -> None:
    """In-process compute time of one scheduling step (scheduling.assign.schedule_step) for N
    pending openb pods on the 1,213 openb GPU nodes, per policy."""
    from ops.bench.step import parse_sizes, run_step_bench

    try:
        sizes = parse_sizes(pending)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    from ops.cli.options import policy_names

    names = _defaulted(policies, policy_names(policies))
    raise typer.Exit(run_step_bench(pending=sizes, policies=names, repeat=repeat, out=out))


@bench_app.command("snapshot")
def snapshot(
    held: str = typer.Option("1000,3000,5000", help="Jobs in the running table, comma-separated sizes."),
    changes: int = typer.Option(32, min=2, help="Jobs that finish and are placed between two steps."),
    repeat: int = typer.Option(30, min=1, help="Timed steps per size."),
    out: Path = typer.Option(Path("reports/bench-snapshot.json"), help="JSON result file.", callback=result_file),
) -> None:
    """What a worker's step pays to know what placed jobs hold: the snapshot built afresh from the
    whole running table (as before) against the one kept from step to step (streams/snapshot_cache.py)."""
    from ops.bench.snapshot import run_snapshot_bench
    from ops.bench.step import parse_sizes

    try:
        sizes = parse_sizes(held, "--held")
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    raise typer.Exit(run_snapshot_bench(held=sizes, changes=changes, repeat=repeat, out=out))


@bench_app.command("archiver")
def archiver(
    rate: float = typer.Option(300.0, help="Events per second published (openb pods on jobs.submitted).",
                               callback=positive),
    seconds: float = typer.Option(20.0, help="How long each run publishes.", callback=positive),
    port: int = typer.Option(0, min=0, max=65535, help="Kafka port (0 = a free one)."),
    out: Path = typer.Option(Path("reports/bench-archiver.json"), help="JSON result file.", callback=result_file),
) -> None:
    """The archiver's event-loop CPU per 1,000 events on a steady stream, with semsched's fetch
    setting and with Kafka's defaults (a fetch answered as soon as any record lands)."""
    from ops.bench.archiver import run_archiver_bench

    raise typer.Exit(run_archiver_bench(rate=rate, seconds=seconds, port=port, out=out, command=invoked_command()))


@bench_app.command("fill")
def fill(
    pods: Path = typer.Option(None, help="A pod list in the openb format (default: the shared default list)."),
    nodes: Path = typer.Option(None, help="A node list in the openb format (default: the 1,213 GPU nodes)."),
    policies: str = typer.Option("", help="Policies, comma-separated (default: every registered one)."),
    seeds: str = typer.Option("42-51", help="Seeds: a range 'a-b' or a comma-separated list."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for bench-fill.json and bench-fill.md."),
) -> None:
    """The openb fill benchmark (FGD's method): pods arrive until 130% of the GPU capacity,
    none departs; GPU allocated at 100% arrived demand per policy, beside the published figures."""
    from ops.bench.fill import run_fill_bench
    from ops.cli.options import policy_names, seed_list

    raise typer.Exit(run_fill_bench(pods=pods, nodes=nodes, policies=_defaulted(policies, policy_names(policies)),
                                    seeds=seed_list(seeds), out_dir=out))  # fmt: skip


@bench_app.command("trace")
def trace(
    trace: str = typer.Option("openb", help="Trace: openb, dlrm2025, google2011 or jsonl."),
    path: Path = typer.Option(None, help="Trace file (default: the shared copy; required for jsonl)."),
    policies: str = typer.Option("", help="Policies, comma-separated; '<ordering>+<placement>' composes "
                                 "(default: ops.bench.simulation.DEFAULT_POLICIES, 13: the heuristic placements "
                                 "under FIFO and the orderings on best-fit)."),
    load: str = typer.Option("extreme", help="Load: native, low, medium, high, extreme (peak utilisation bands) "
                             "or an arrival factor like 250x."),
    step: float = typer.Option(1.0, help="Scheduling step (virtual seconds).", callback=positive),
    heterogeneity: str = typer.Option("none", help="Node speed spread: none, low, medium, high, extreme or 0..1."),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed (node speeds)."),
    limit: int = typer.Option(None, help="Only the first N jobs of the trace."),
    nodes: int = typer.Option(None, min=1, help="A seeded sample of N nodes (for a trace slice smaller than its cluster)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for the report, JSON and plots."),
) -> None:
    """Replay a real trace with departures in the offline simulator, once per policy: JCT,
    queueing delay, GPU allocation, step latency and stability side by side."""

    from ops.bench.simulation import DEFAULT_POLICIES
    from ops.bench.trace import run_trace_bench
    from ops.cli.options import policy_names

    names = policy_names(policies, DEFAULT_POLICIES)
    raise typer.Exit(run_trace_bench(trace=trace, path=path, policies=names, load=load, step=step,
                                     heterogeneity=heterogeneity, seed=seed, limit=limit, nodes=nodes, out_dir=out,
                                     command=invoked_command()))  # fmt: skip


from ops.cli.bench_dag import dag as bench_dag  # noqa: E402  (its own module, registered here)

bench_app.command("dag")(bench_dag)

from ops.cli.bench_dag_bounds import dag_bounds as bench_dag_bounds  # noqa: E402

bench_app.command("dag-bounds")(bench_dag_bounds)

from ops.cli.bench_learned import learned as bench_learned  # noqa: E402

bench_app.command("learned")(bench_learned)

from ops.cli.bench_damping import damping as bench_damping  # noqa: E402

bench_app.command("damping")(bench_damping)

from ops.cli.bench_duration import duration as bench_duration  # noqa: E402

bench_app.command("duration")(bench_duration)

from ops.cli.bench_duration import sjf as bench_sjf  # noqa: E402

bench_app.command("sjf")(bench_sjf)

from ops.cli.bench_triton import triton as bench_triton  # noqa: E402

bench_app.command("triton")(bench_triton)

from ops.cli.bench_model_calls import model_calls as bench_model_calls  # noqa: E402

bench_app.command("model-calls")(bench_model_calls)


@bench_app.command("sweep")
def sweep(
    trace: str = typer.Option("openb", help="Trace: openb, dlrm2025, google2011 or jsonl."),
    path: Path = typer.Option(None, help="Trace file (default: the shared copy)."),
    policies: str = typer.Option("fifo-first-fit,best-fit,fgd,sjf-predicted+best-fit",
                                 help="Policies, comma-separated ('<ordering>+<placement>' composes; 'learned' "
                                 "is the trained model)."),
    sweeps: str = typer.Option("step,load,heterogeneity", help="Which sweeps, comma-separated: step, load, "
                               "heterogeneity, depth (depth needs --models)."),
    steps: str = typer.Option("1,2,4,8", help="Scheduling step sizes (virtual seconds) for the step sweep."),
    base_load: str = typer.Option("extreme", help="Load of the step and heterogeneity sweeps."),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed (node speeds)."),
    limit: int = typer.Option(None, help="Only the first N jobs of the trace."),
    nodes: int = typer.Option(None, min=1, help="A seeded sample of N nodes (for a trace slice smaller than its cluster)."),
    model: Path = typer.Option(None, help="The learned policy's model directory for the step, load and "
                               "heterogeneity sweeps (default: $SEMSCHED_MODEL_DIR, else models/latest)."),
    models: str = typer.Option("", help="Depth sweep: model directories, comma-separated, one per depth."),
    fill_seeds: str = typer.Option("42-44", help="Depth sweep: openb fill seeds ('a-b' or a list)."),
    pending: int = typer.Option(256, min=1, help="Depth sweep: pending jobs of the latency steps."),
    repeat: int = typer.Option(30, min=1, help="Depth sweep: timed consecutive steps per model (pair cache, churn "
                               "between steps, as promotion times them), after one untimed first step."),
    fill_pods: Path = typer.Option(None, help="Depth sweep: pod list for the fill (default: the openb list)."),
    fill_nodes: Path = typer.Option(None, help="Depth sweep: node list for the fill (default: the openb GPU nodes)."),
    out: Path = typer.Option(Path("reports"), callback=report_dir, help="Directory for the report, JSON and plots."),
) -> None:
    """The seed paper's sensitivity sweeps (step size 1–8, load Low–Extreme, node heterogeneity
    Low–Extreme): makespan, scheduling latency, throughput and stability per policy; and the
    depth sweep of the learned policy (encoder depth 2–10: fill allocation and model step
    latency per trained model).

    The learned policy's rows name its model version. A depth is fixed when a model is trained,
    so the depth sweep reads one model per depth; train the series (6–12 minutes a model on
    2 cores with the default recipe), then sweep:

    \b
      for d in 2 3 4 5 6 7 8 9 10; do
        semsched train --depth $d --version depth-$d-s0 \\
          --out models/candidates/depth --no-promote
      done
      semsched bench sweep --sweeps depth --models \\
        $(ls -d models/candidates/depth/depth-*-s0 | paste -sd, -)

    A quicker series (a lean head, 2 training seeds, 4 epochs; a few minutes a model): add
    --train-seeds 0-1 --val-seeds 8 --epochs 4 --head-hidden 16 --head-layers 1
    --no-frag-features to each train command.
    """

    from ops.bench.sweep import run_sweep_bench
    from ops.cli.options import policy_names, seed_list

    try:
        step_list = [float(s) for s in steps.split(",") if s.strip()]
    except ValueError:
        step_list = [math.nan]
    if not step_list or not all(0 < s < math.inf for s in step_list):
        raise typer.BadParameter(f"must be finite numbers > 0, comma-separated; not {steps!r}", param_hint="--steps")
    if not [s for s in sweeps.split(",") if s.strip()]:  # (an empty report over a real one, exit 0)
        raise typer.BadParameter(f"names no sweep: {sweeps!r}", param_hint="--sweeps")
    raise typer.Exit(run_sweep_bench(trace=trace, path=path, policies=policy_names(policies),
                                     sweeps=[s.strip() for s in sweeps.split(",") if s.strip()], steps=step_list,
                                     base_load=base_load, seed=seed, limit=limit, nodes=nodes, out_dir=out,
                                     command=invoked_command(), model=model,
                                     models=[Path(m.strip()) for m in models.split(",") if m.strip()],
                                     fill_seeds=seed_list(fill_seeds), pending=pending, repeat=repeat,
                                     fill_pods=fill_pods, fill_nodes=fill_nodes))  # fmt: skip
