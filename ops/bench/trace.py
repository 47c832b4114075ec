"""``semsched bench trace``: replay a real trace with departures through the offline
simulator, once per policy, and compare JCT, queueing delay, GPU allocation, scheduling
latency and stability (definitions in ``scheduling/metrics``). Writes ``bench-trace-<trace>``
.md / .json and PNGs: JCT and queueing-delay CDFs, queue length and GPU allocation over time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from ops.bench.model_check import duration_trained_on, duration_version, learned_version, model_pinned
from ops.bench.simulation import load_for_bench, load_shortfall, parse_heterogeneity, parse_load, run_policies
from ops.console import wide_console
from ops.reports import Report
from scheduling.simulator import SimConfig, SimJob, SimResult
from scheduling.simulator.bounds import instance_limit_bounds

console = wide_console()

JOB_COLUMNS = ["policy", "finished", "rejected", "unfinished", "jct_mean", "jct_p50", "jct_p95", "jct_p99", "queue_mean",
               "queue_p50", "queue_p95", "queue_p99", "makespan_s", "throughput_jobs_per_s"]  # fmt: skip
CLUSTER_COLUMNS = ["policy", "gpu_alloc_mean", "gpu_alloc_peak", "gpu_frag_rate_mean", "gpu_partial_ratio_mean", "steps", "step_ms_p50", "step_ms_p99",
                   "placement_stability", "order_agreement", "wall_s"]  # fmt: skip


@model_pinned
def run_trace_bench(*, trace: str, path: Path | None, policies: Sequence[str], load: str, step: float,
                    heterogeneity: str, seed: int, limit: int | None, nodes: int | None, out_dir: Path, command: str) -> int:  # fmt: skip
    started = time.perf_counter()
    model, why = learned_version(policies)
    if why:
        console.print(f"[red]bench trace: {why}")
        return 2
    workload = load_for_bench(console, trace, path, limit, nodes, seed)
    if isinstance(workload, int):
        return workload
    with console.status("planning the load…"):
        try:
            load_name, plan = parse_load(load, workload)
            het_name, spread = parse_heterogeneity(heterogeneity)
        except ValueError as e:
            console.print(f"[red]{escape(str(e))}")
            return 2
    jobs = workload.scaled(plan.factor, plan.copies)
    config = SimConfig(step_s=step, load_factor=plan.factor, speed_spread=spread, seed=seed)
    skipped = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in workload.skipped.items()) or "none"
    noted = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in workload.notes.items())
    setting = (f"**{trace}**: {len(workload.nodes):,} nodes; {len(workload.jobs):,} jobs with a run time "
               f"(left out: {skipped}{f'; the loader noted: {noted}' if noted else ''}); load **{load_name}**: arrivals ×{plan.factor:,.4g}"
               f"{f' and {plan.copies} superposed replicas' if plan.copies > 1 else ''} → {len(jobs):,} jobs, "
               f"offered peak {plan.offered_peak:.0%} of the dominant resource; scheduling step {step:g} s; "
               f"node speeds {het_name} (seed {seed})." + (f" The learned policy's model: {model}." if model else "")
               + (f" The learned orderings' duration model: {duration}." if (duration := duration_version(policies)) else ""))  # fmt: skip
    console.print(setting)
    if (short := load_shortfall(load_name, plan)) is not None:
        console.print(f"[yellow]warning: {short}")
        setting += f" **Warning:** {short}."
    if (seen := duration_trained_on(policies, trace)) is not None:
        console.print(f"[yellow]warning: {seen}")
        setting += f" **Warning:** {seen}."
    results = run_policies(workload.nodes, jobs, policies, config, console)
    report = Report(out_dir, f"bench-trace-{trace}", f"Trace replay: {trace}", command, console=console,
                    started=started)  # fmt: skip
    report.text(setting)
    report.text("Times in seconds of trace time. JCT = finish − submit; queueing delay = first start − "
                "submit; GPU allocation = time-weighted share of GPU capacity over the arrival span; "
                "step ms = compute time of one scheduling step on this machine; placement stability and "
                "order agreement as defined in `scheduling/metrics/stability.py`. `sjf-oracle` reads the "
                "true run times: a bound to compare with, not a deployable policy.")  # fmt: skip
    write_results(report, results)
    if spread == 0:
        write_instance_limit_floor(report, workload.nodes, jobs, results)
    report.data("setting", {"trace": trace, "nodes": len(workload.nodes), "jobs": len(jobs), "load": load_name,
                            "load_factor": plan.factor, "copies": plan.copies, "offered_peak": plan.offered_peak,
                            "step_s": step, "heterogeneity": het_name, "speed_spread": spread, "seed": seed,
                            "skipped": workload.skipped})  # fmt: skip
    report.write()
    return 0


def write_results(report: Report, results: Sequence[SimResult]) -> None:
    """The per-policy table and the four plots."""
    rows = [r.summary() for r in results]
    report.table("Jobs: completion and queueing (s)", rows, JOB_COLUMNS)
    report.table("Cluster and scheduler", rows, CLUSTER_COLUMNS, note=(
        "gpu_alloc_mean is a time mean; gpu_frag_rate_mean and gpu_partial_ratio_mean are means over the "
        "scheduling steps that sampled them (steps run while jobs are pending: a burst weighs as much as a "
        "long steady stretch)."))
    report.data("results", rows)
    report.cdf_plot("jct-cdf", "JCT CDF", "JCT (s, symlog)", {r.policy: [o.jct for o in r.outcomes if o.jct is not None]
                                                              for r in results}, log_x=True)  # fmt: skip
    report.cdf_plot("queue-cdf", "Queueing delay CDF", "queueing delay (s, symlog)",
                    {r.policy: [w for o in r.outcomes if (w := o.queueing_delay) is not None] for r in results},
                    log_x=True)  # fmt: skip
    report.line_plot("queue", "Queue length after each step", "time (s)", "pending jobs",
                     {r.policy: r.queue_length() for r in results})  # fmt: skip
    report.line_plot("gpu-allocation", "GPU allocation over the arrival span", "time (s)", "allocated share",
                     {r.policy: r.gpu_allocation() for r in results})  # fmt: skip


def write_instance_limit_floor(report: Report, nodes: Sequence, jobs: Sequence[SimJob],
                               results: Sequence[SimResult]) -> None:  # fmt: skip
    """Where apps limited per node queue whatever the placement does: each policy's queueing of
    their tasks beside the floor of :func:`~scheduling.simulator.bounds.instance_limit_bounds`."""
    bounds = [b for b in instance_limit_bounds(nodes, jobs) if b.wait_s > 0]
    if not bounds or not jobs:
        return
    limited = frozenset().union(*(b.job_ids for b in bounds))
    floor = sum(b.wait_s for b in bounds)
    rows = []
    for r in results:
        waits = {o.job_id: o.queueing_delay for o in r.outcomes}
        theirs = sum(w for j in limited if (w := waits.get(j)) is not None)
        everyone = sum(w for w in waits.values() if w is not None)
        rows.append({"policy": r.policy, "limited_queue_mean": theirs / len(limited),
                     "floor_mean": floor / len(limited), "above_floor_pct": 100 * (theirs / floor - 1),
                     "share_of_all_queueing_pct": 100 * theirs / everyone if everyone else None,
                     "queue_mean_all": everyone / len(jobs), "floor_over_all_jobs": floor / len(jobs),
                     "not_started": sum(waits.get(j.job_id) is None for j in jobs)})  # fmt: skip
    apps = "; ".join(f"{b.app}: {b.tasks:,} tasks on {b.slots:,} slots, floor {b.mean_wait_s:,.1f} s mean"
                     for b in bounds[:5]) + (f"; and {len(bounds) - 5} more" if len(bounds) > 5 else "")  # fmt: skip
    report.table("Queueing behind per-node instance limits (s)", rows, note=(
        f"{len(bounds)} app(s) submit more tasks than the cluster has slots for under their "
        f"max_instances_per_node ({apps}). Their tasks queue at least floor_mean whatever the placement, "
        "when they start in queue order (fifo and the plain placements; not sjf-*, nor preemptive las); "
        "floor_over_all_jobs is that floor spread over every job, a floor of queue_mean_all for those "
        "policies. Both means are per submitted task (job): a job that never started adds no wait, and "
        "not_started counts those (when it is not 0, queue_mean_all is below the main table's queue_mean, "
        "which is per started job). See scheduling/simulator/bounds.py."))
    report.data("instance_limit_floor", [{"app": b.app, "tasks": b.tasks, "slots": b.slots, "wait_s": b.wait_s}
                                         for b in bounds])  # fmt: skip
