"""``semsched bench sweep``: the seed paper's sensitivity sweeps in the offline simulator.

Three sweeps, each varying one knob from a base setting (load ``extreme``, step 1 s, no
speed spread): the scheduling step size (``--steps``, virtual seconds), the peak load
intensity Low / Medium / High / Extreme (bands of peak utilisation, made by scaling
arrival rates: :func:`scheduling.simulator.plan_load`), and node heterogeneity Low /
Medium / High / Extreme (speed spread ±5 %, ±15 %, ±40 %, ±60 %). Each reports makespan,
scheduling latency (per-step compute p50/p99, and the queueing delay it causes),
throughput and stability per policy, as tables and one plot per metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ops.bench.simulation import load_for_bench, parse_load, run_policies
from ops.reports import Report, wide_console
from scheduling.simulator import HETEROGENEITY_LEVELS, LOAD_LEVELS, SimConfig, Workload

console = wide_console()

SWEEPS = ("step", "load", "heterogeneity")
METRICS = {  # summary key -> (label for plots)
    "makespan_s": "makespan (s)",
    "queue_mean": "mean queueing delay (s)",
    "jct_mean": "mean JCT (s)",
    "step_ms_p99": "step compute p99 (ms)",
    "throughput_jobs_per_s": "throughput (jobs/s)",
    "placement_stability": "placement stability",
    "order_agreement": "order agreement",
}
COLUMNS = ["policy", "point", "finished", "makespan_s", "jct_mean", "queue_mean", "queue_p95", "step_ms_p50",
           "step_ms_p99", "throughput_jobs_per_s", "placement_stability", "order_agreement", "gpu_alloc_mean"]  # fmt: skip


def run_sweep_bench(*, trace: str, path: Path | None, policies: Sequence[str], sweeps: Sequence[str],
                    steps: Sequence[float], base_load: str, seed: int, limit: int | None, nodes: int | None,
                    out_dir: Path,
                    command: str) -> int:  # fmt: skip
    unknown = [s for s in sweeps if s not in SWEEPS]
    if unknown:
        console.print(f"[red]unknown sweeps {unknown}; choose from {', '.join(SWEEPS)}")
        return 2
    workload = load_for_bench(console, trace, path, limit, nodes, seed)
    if isinstance(workload, int):
        return workload
    try:
        with console.status("planning the base load…"):
            base_name, base_plan = parse_load(base_load, workload)
    except ValueError as e:
        console.print(f"[red]{e}")
        return 2
    report = Report(out_dir, f"bench-sweep-{trace}", f"Sensitivity sweeps: {trace}", command, console=console)
    report.text(f"**{trace}**: {len(workload.nodes):,} nodes, {len(workload.jobs):,} jobs with a run time. "
                f"Base setting: load **{base_name}** (offered peak {base_plan.offered_peak:.0%}), step 1 s, "
                f"equal node speeds, seed {seed}. Each sweep varies one knob. Definitions: "
                f"`scheduling/metrics`; load bands and speed levels: `scheduling/simulator`.")  # fmt: skip
    everything: dict[str, list[dict]] = {}
    for sweep in sweeps:
        points = _points(sweep, workload, base_plan, steps, seed)
        rows: list[dict] = []
        for label, x, jobs, config in points:
            console.rule(f"[bold]{sweep}: {label}")
            for result in run_policies(workload.nodes, jobs, policies, config, console, label=f"{label} · "):
                rows.append({**result.summary(), "point": label, "x": x})
        everything[sweep] = rows
        report.table(f"Sweep: {sweep}", rows, COLUMNS)
        for key, ylabel in METRICS.items():
            series = {p: ([r["x"] for r in rows if r["policy"] == p], [r[key] for r in rows if r["policy"] == p])
                      for p in policies}  # fmt: skip
            if all(v is None for _, ys in series.values() for v in ys):
                continue
            series = {p: (xs, [float("nan") if v is None else v for v in ys]) for p, (xs, ys) in series.items()}
            report.line_plot(f"{sweep}-{key}", f"{sweep} sweep: {ylabel}", _xlabel(sweep), ylabel, series)
    report.data("sweeps", everything)
    report.write()
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
        jobs = workload.scaled(plan.factor, plan.copies)
        out.append((f"{name} ({plan.offered_peak:.0%})", plan.offered_peak, jobs,
                    SimConfig(load_factor=plan.factor, seed=seed)))  # fmt: skip
    return out
