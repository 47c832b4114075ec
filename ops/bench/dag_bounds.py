"""``semsched bench dag-bounds``: how much room is there above HEFT? On the held-out random
DAGs of ``semsched bench dag`` (the same generator config and seed stream) and optionally its
WfInstances workflows: HEFT's makespan, the best schedule CP-SAT finds in a time limit
(warm-started with HEFT's), CP-SAT's proven lower bound and the analytic ones
(:mod:`ops.bench.dag_lower_bounds`), all as SLR (makespan / CP_MIN, as ``bench dag`` reports).

"Largest possible improvement over HEFT" = 1 - mean SLR of the lower bound / mean SLR of
HEFT: no scheduler can beat HEFT's mean SLR by more. "Found" = the same with CP-SAT's best.
Every CP-SAT schedule passes ``scheduling.dag.check_schedule`` (``solve_exact`` raises if not).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.bench.dag import HeldOutDagSet, hetero_machines
from ops.bench.dag_cpsat import solve_exact
from ops.bench.dag_lower_bounds import analytic_bounds
from ops.console import wide_console
from ops.reports import Report
from scheduling.dag import DagProblem, check_schedule, held_out_dags
from scheduling.dag.schedulers import get_dag_scheduler

#: DAG size buckets of the summary table: (label, fewest tasks, most tasks)
SIZE_BUCKETS = (("20–49", 20, 49), ("50–99", 50, 99), ("100–150", 100, 150))


@dataclass(frozen=True)
class DagBoundsOptions(HeldOutDagSet):
    """``bench dag``'s DAG set (the same generator config and stream), and the solver's limits."""

    time_limit_s: float = 15.0
    workers: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.time_limit_s <= 0 or self.workers < 1:
            raise ValueError("need --time-limit > 0 and --workers >= 1")


def bound_one(problem: DagProblem, options: DagBoundsOptions) -> dict[str, Any]:
    """HEFT, CP-SAT and the bounds on one problem, as one JSON-able row (SLRs over CP_MIN)."""
    heft = get_dag_scheduler("heft").schedule(problem)
    if check_schedule(problem, heft):
        raise AssertionError(f"HEFT made an invalid schedule for {problem.name}")
    res = solve_exact(problem, heft, time_limit_s=options.time_limit_s, workers=options.workers, seed=options.seed)
    bounds = analytic_bounds(problem)
    cp = bounds["cp_min"]
    return {"dag": problem.name, "tasks": problem.n_tasks, "edges": problem.graph.n_edges,
            "procs": problem.n_procs, "heft": heft.makespan, "best": res.makespan, "lower": res.lower_bound,
            "cpsat_bound": res.bound_units / res.scale, "cpsat_objective": res.objective_units / res.scale,
            "analytic": bounds, "optimal": res.optimal, "status": res.status, "scale": res.scale,
            "rounding_drift": res.rounding_drift, "seconds": res.seconds,
            "slr_heft": heft.makespan / cp, "slr_best": res.makespan / cp, "slr_lower": res.lower_bound / cp}  # fmt: skip


def summarise(rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """One summary row: mean SLRs, share proved optimal and the improvement over HEFT."""
    slr = {k: np.array([r[f"slr_{k}"] for r in rows]) for k in ("heft", "best", "lower")}
    return {"tasks": label, "DAGs": len(rows), "HEFT SLR": float(slr["heft"].mean()),
            "CP-SAT best SLR": float(slr["best"].mean()), "lower bound SLR": float(slr["lower"].mean()),
            "proved optimal": f"{np.mean([r['optimal'] for r in rows]):.0%}",
            "max possible vs HEFT": f"{slr['lower'].mean() / slr['heft'].mean() - 1:+.1%}",
            "found vs HEFT": f"{slr['best'].mean() / slr['heft'].mean() - 1:+.1%}",
            "gap best/lower p50": f"{np.median([r['best'] / r['lower'] - 1 for r in rows]):.1%}",
            "s / DAG": float(np.mean([r["seconds"] for r in rows]))}  # fmt: skip


def run_dag_bounds(options: DagBoundsOptions, out_dir: Path, command: str, *, console: Console | None = None) -> int:
    from ops.workflows import load_wfinstance, wfinstance_files

    console = console or wide_console()
    report = Report(out_dir, "bench-dag-bounds", "DAG workflows: how far from optimal is HEFT?", command,
                    console=console)  # fmt: skip
    problems: list[tuple[str, DagProblem]] = []
    for path in wfinstance_files() if options.workflows else []:
        recorded = load_wfinstance(path)
        problems.append(("recorded", recorded.problem))
        machines = hetero_machines(recorded.machines)
        if machines:
            problems.append(("hetero-16", load_wfinstance(path, machines=machines).problem))
    n_wf = len(problems)
    problems += [("random", p) for p in held_out_dags(options.generator(), options.dags, options.seed)]
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    with Progress(TextColumn("[bold]bench dag-bounds"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[what]}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:  # fmt: skip
        task = bar.add_task("dag", total=len(problems), what="")
        for platform, problem in problems:
            bar.update(task, what=f"{problem.name} ({problem.n_tasks} tasks)")
            rows.append(bound_one(problem, options) | {"platform": platform})
            bar.advance(task)
    _write(report, options, rows[:n_wf], rows[n_wf:], time.perf_counter() - t_start)
    report.write()
    return 0


def _write(report: Report, options: DagBoundsOptions, wf: list[dict[str, Any]], rand: list[dict[str, Any]],
           compute_s: float) -> None:  # fmt: skip
    g = options.generator()
    report.text(
        f"CP-SAT (OR-Tools, {options.workers} workers, {options.time_limit_s:g} s per DAG, warm-started with "
        "HEFT's schedule) on the exact model HEFT schedules in: heterogeneous per-processor costs, "
        "communication cost between different processors (free on one), precedence, no preemption, "
        "one task at a time per processor, any start time (so insertion-based list schedules are "
        "solutions). Times are integers in units of 1/scale (x1000 or x10,000, per DAG: HEFT's makespan "
        ">= 1e5 units), costs rounded down, so CP-SAT's bound is a valid lower bound of the real "
        "problem; its schedules are replayed with the real costs through ListSchedulingEnv and pass "
        "check_schedule. SLR = makespan / CP_MIN (the `bench dag` SLR). Lower bound = max(CP-SAT's "
        "proven bound, CP_MIN, total min work / P, the comm-path bound of ops/bench/dag_lower_bounds.py). "
        "'proved optimal' = CP-SAT closed the gap (up to the 1/scale rounding)."
    )
    if rand:
        buckets = [(lab, [r for r in rand if lo <= r["tasks"] <= hi]) for lab, lo, hi in SIZE_BUCKETS]
        table = [summarise(rs, lab) for lab, rs in buckets if rs] + [summarise(rand, "all")]
        report.table(f"{len(rand)} held-out random DAGs ({g.tasks_min}–{g.tasks_max} tasks, {g.processors} "
                     f"processors, CCR {g.ccr:g}, beta {g.beta:g}, seed {options.seed}): SLR means", table,
                     note="max possible vs HEFT = mean lower-bound SLR / mean HEFT SLR - 1 (no scheduler "
                          "can do better on these DAGs); found vs HEFT = the same for CP-SAT's best "
                          "schedule; gap = CP-SAT best / lower bound - 1 per DAG.")  # fmt: skip
        report.cdf_plot("slr-cdf", "SLR on held-out random DAGs", "SLR",
                        {"HEFT": [r["slr_heft"] for r in rand], "CP-SAT best": [r["slr_best"] for r in rand],
                         "lower bound": [r["slr_lower"] for r in rand]})  # fmt: skip
        which = {k: float(np.mean([r["analytic"][k] / r["lower"] for r in rand])) for k in ("cp_min", "work",
                                                                                                "comm_path")}
        report.text("Mean analytic bound / final lower bound: " + ", ".join(f"{k} {v:.3f}" for k, v in which.items())
                    + f"; CP-SAT's own bound is the largest on {np.mean([r['cpsat_bound'] >= r['analytic']['best'] - 1e-6 for r in rand]):.0%} of the DAGs.")  # fmt: skip
    if wf:
        report.table("WfInstances workflows (as in `bench dag`): makespan (s)",
                     [{"workflow": r["dag"].split("-")[0], "platform": r["platform"], "tasks": r["tasks"],
                       "procs": r["procs"], "HEFT": r["heft"], "CP-SAT best": r["best"], "lower bound": r["lower"],
                       "optimal": r["optimal"], "max possible vs HEFT": f"{r['lower'] / r['heft'] - 1:+.1%}",
                       "found vs HEFT": f"{r['best'] / r['heft'] - 1:+.1%}"} for r in wf])  # fmt: skip
    report.text(f"Computation: {compute_s:.0f} s.")
    report.data("options", asdict(options) | {"generator": g.__dict__})
    report.data("results", {"random": rand, "wfinstances": wf})
