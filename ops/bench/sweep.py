"""``semsched bench sweep``: the seed paper's sensitivity sweeps in the offline simulator.

Three sweeps, each varying one knob from a base setting (load ``extreme``, step 1 s, no
speed spread): the scheduling step size (``--steps``, virtual seconds), the peak load
intensity Low / Medium / High / Extreme (bands of peak utilisation, made by scaling
arrival rates: :func:`scheduling.simulator.plan_load`), and node heterogeneity Low /
Medium / High / Extreme (speed spread ±5 %, ±15 %, ±40 %, ±60 %). Each reports makespan,
scheduling latency (per-step compute p50/p99, and the queueing delay it causes),
throughput and stability per policy, as tables and one plot per metric.

The ``learned`` policy runs in these sweeps like any heuristic (``--policies learned,fgd,…``).
Its model (``--model DIR``, else ``$SEMSCHED_MODEL_DIR``, else ``models/latest``) is resolved
once, before the sweep starts, so a promotion during a long sweep cannot mix versions; the
report names the version, and the sweep refuses to run when the model does not load (the
policy would silently be its fallback heuristic).

A fourth sweep, ``depth``, is the learned policy at encoder depth 2..10: one trained model
per depth (``--models``), each measured on the openb fill benchmark and for its per-step
latency (:mod:`ops.bench.depth_sweep`, which also says how to train the series).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from ops.bench.depth_sweep import check_models, run_depth_sweep
from ops.bench.model_check import duration_trained_on, duration_version, learned_version, pinned_model
from ops.bench.simulation import load_for_bench, load_shortfall, parse_load, run_policies
from ops.console import wide_console
from ops.reports import Report
from scheduling.simulator import HETEROGENEITY_LEVELS, LOAD_LEVELS, SimConfig, Workload

console = wide_console()

SWEEPS = ("step", "load", "heterogeneity", "depth")
METRICS = {  # summary key -> (label for plots)
    "makespan_s": "makespan (s)",
    "queue_mean": "mean queueing delay (s)",
    "jct_mean": "mean JCT (s)",
    "step_ms_p99": "step compute p99 (ms)",
    "throughput_jobs_per_s": "throughput (jobs/s)",
    "placement_stability": "placement stability",
    "order_agreement": "order agreement",
}
COLUMNS = ["policy", "point", "finished", "unfinished", "makespan_s", "jct_mean", "queue_mean", "queue_p95", "step_ms_p50",
           "step_ms_p99", "throughput_jobs_per_s", "placement_stability", "order_agreement", "gpu_alloc_mean"]  # fmt: skip


def run_sweep_bench(*, trace: str, path: Path | None, policies: Sequence[str], sweeps: Sequence[str],
                    steps: Sequence[float], base_load: str, seed: int, limit: int | None, nodes: int | None,
                    out_dir: Path, command: str, model: Path | None = None, models: Sequence[Path] = (),
                    fill_seeds: Sequence[int] = (42, 43, 44), pending: int = 256, repeat: int = 30,
                    fill_pods: Path | None = None, fill_nodes: Path | None = None) -> int:  # fmt: skip
    """The chosen sweeps in one report (``bench-sweep-<trace>``, or ``bench-sweep-depth`` for
    the depth sweep alone). ``model``: the learned policy's model for the simulator sweeps;
    ``models``, ``fill_seeds``, ``pending``, ``repeat``, ``fill_pods``, ``fill_nodes``: the depth sweep's."""
    unknown = [s for s in sweeps if s not in SWEEPS]
    if unknown:
        console.print(f"[red]unknown sweeps {unknown}; choose from {', '.join(SWEEPS)}")
        return 2
    started = time.perf_counter()
    simulated = [s for s in sweeps if s != "depth"]
    if "depth" in sweeps and (why := check_models(models)):
        console.print(f"[red]{why}")
        return 2
    with pinned_model(model) as model_dir:
        learned, why = learned_version(policies if simulated else [])
        if why:
            console.print(f"[red]{why}")
            return 2
        name = f"bench-sweep-{trace}" if simulated else "bench-sweep-depth"
        title = f"Sensitivity sweeps: {trace}" if simulated else "Depth sweep: the learned policy"
        report = Report(out_dir, name, title, command, console=console, started=started)
        everything: dict[str, list[dict]] = {}
        if simulated:
            code = _simulated_sweeps(report, everything, trace=trace, path=path, policies=policies, sweeps=simulated,
                                     steps=steps, base_load=base_load, seed=seed, limit=limit, nodes=nodes,
                                     learned=learned, model_dir=model_dir)  # fmt: skip
            if code:
                return code
        if "depth" in sweeps:
            everything["depth"] = run_depth_sweep(report, console, models=models, seeds=fill_seeds, pending=pending,
                                                  repeat=repeat, pods=fill_pods, nodes=fill_nodes)  # fmt: skip
    report.data("sweeps", everything)
    report.write()
    return 0


def _simulated_sweeps(report: Report, everything: dict[str, list[dict]], *, trace: str, path: Path | None,
                      policies: Sequence[str], sweeps: Sequence[str], steps: Sequence[float], base_load: str,
                      seed: int, limit: int | None, nodes: int | None, learned: str | None,
                      model_dir: Path) -> int:  # fmt: skip
    """The step, load and heterogeneity sweeps in the simulator, into ``report``; an exit code."""
    workload = load_for_bench(console, trace, path, limit, nodes, seed)
    if isinstance(workload, int):
        return workload
    try:
        with console.status("planning the base load…"):
            base_name, base_plan = parse_load(base_load, workload)
    except ValueError as e:
        console.print(f"[red]{escape(str(e))}")
        return 2
    report.text(f"**{trace}**: {len(workload.nodes):,} nodes, {len(workload.jobs):,} jobs with a run time. "
                f"Base setting: load **{base_name}** (offered peak {base_plan.offered_peak:.0%}), step 1 s, "
                f"equal node speeds, seed {seed}. Each sweep varies one knob. Definitions: "
                f"`scheduling/metrics`; load bands and speed levels: `scheduling/simulator`.")  # fmt: skip
    if left := {**workload.skipped, **workload.notes}:  # what the simulator and the loader left out or noted
        report.text("Left out or noted on loading: " + ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in left.items())
                    + ".")  # fmt: skip
    if learned is not None:
        report.text(f"`learned` = model **{learned}** (`{model_dir}`), in-process unless `SEMSCHED_INFERENCE` "
                    "says otherwise; its rows carry the version in the `model` column.")  # fmt: skip
        report.data("learned_model", {"version": learned, "dir": str(model_dir)})
    if (duration := duration_version(policies)) is not None:
        report.text(f"The learned orderings (`sjf-learned`, `gittins-learned`) order by duration model **{duration}**.")
        report.data("duration_model", duration)
    if (seen := duration_trained_on(policies, trace)) is not None:
        console.print(f"[yellow]warning: {seen}")
        report.text(f"**Warning:** {seen}.")
    columns = COLUMNS if learned is None else [*COLUMNS[:1], "model", *COLUMNS[1:]]
    from inference.policy import uses_learned

    for sweep in sweeps:
        points = _points(sweep, workload, base_plan, steps, seed)
        rows: list[dict] = []
        for label, x, jobs, config in points:
            console.rule(f"[bold]{sweep}: {label}")
            for result in run_policies(workload.nodes, jobs, policies, config, console, label=f"{label} · "):
                row = {**result.summary(), "point": label, "x": x}
                if learned is not None:
                    row["model"] = learned if uses_learned(str(row["policy"])) else ""
                rows.append(row)
        everything[sweep] = rows
        report.table(f"Sweep: {sweep}", rows, columns)
        for key, ylabel in METRICS.items():
            series = {p: ([r["x"] for r in rows if r["policy"] == p], [r[key] for r in rows if r["policy"] == p])
                      for p in policies}  # fmt: skip
            if all(v is None for _, ys in series.values() for v in ys):
                continue
            series = {p: (xs, [float("nan") if v is None else v for v in ys]) for p, (xs, ys) in series.items()}
            report.line_plot(f"{sweep}-{key}", f"{sweep} sweep: {ylabel}", _xlabel(sweep), ylabel, series)
    return 0


def _xlabel(sweep: str) -> str:
    return {"step": "scheduling step (s)", "load": "offered peak utilisation",
            "heterogeneity": "node speed spread (±)"}[sweep]  # fmt: skip


def _points(sweep: str, workload: Workload, base_plan, steps: Sequence[float], seed: int):  # noqa: ANN001, ANN202
    """``(label, x, jobs, config)`` per point of a sweep."""
    from scheduling.simulator import plan_load

    base_jobs = workload.scaled(base_plan.factor, base_plan.copies)
    if sweep == "step":
        return [(f"step {s:g} s", s, base_jobs, SimConfig(step_s=s, load_factor=base_plan.factor, seed=seed))
                for s in steps]  # fmt: skip
    if sweep == "heterogeneity":
        return [(f"{name} ±{spread:.0%}", spread, base_jobs,
                 SimConfig(speed_spread=spread, load_factor=base_plan.factor, seed=seed))
                for name, spread in HETEROGENEITY_LEVELS.items() if name != "none"]  # fmt: skip
    out = []
    for name, target in LOAD_LEVELS.items():
        with console.status(f"planning load {name}…"):
            plan = plan_load(workload.nodes, workload.jobs, target)
        if (short := load_shortfall(name, plan)) is not None:
            console.print(f"[yellow]warning: {short}")
        jobs = workload.scaled(plan.factor, plan.copies)
        out.append((f"{name} ({plan.offered_peak:.0%})", plan.offered_peak, jobs,
                    SimConfig(load_factor=plan.factor, seed=seed)))  # fmt: skip
    return out
