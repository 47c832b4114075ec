"""``semsched bench fill``: the openb fill benchmark (method in ``scheduling/fill.py`` and
``../shared/benchmarks/openb-fill.md``), every policy over every seed, beside the FGD
authors' checked-in figures. Writes its report through :class:`ops.reports.Report`:
``bench-fill.md``, ``bench-fill.json``, ``bench-fill-allocation.png`` (allocated GPU %
against arrived demand %, mean over seeds) and ``bench-fill-allocation-80-130.png`` (the
part where the policies differ)."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.bench import environment
from ops.bench.model_check import learned_version, model_pinned, seen_fill_seeds
from ops.console import wide_console

console = wide_console()

#: allocated GPU at 100 % arrived, default openb pod list, mean of seeds 42–51 (their repository):
#: our policy name -> (their policy name, their figure)
REFERENCE: dict[str, tuple[str, float]] = {
    "random": ("Random", 86.30),
    "dot-product": ("DotProd", 90.62),
    "gpu-clustering": ("GpuClustering", 91.65),
    "gpu-packing": ("GpuPacking", 91.78),
    "best-fit-leftover": ("BestFit", 92.86),
    "fgd": ("FGD", 95.23),
}
#: arrived-demand % at which the report tabulates the curve
CHECKPOINTS = (50, 60, 70, 80, 90, 100, 110, 120, 130)
CURVE = tuple(range(1, 131))


def policy_kwargs(name: str, seed: int, workload: Any) -> dict[str, Any]:
    """What a policy needs from the benchmark: ``random`` its seed, ``fgd`` the target
    workload (estimated from the whole pod list, as the authors' simulator does)."""
    if name == "random":
        return {"seed": seed}
    if name == "fgd":
        return {"workload": workload}
    return {}


@model_pinned
def run_fill_bench(*, pods: Path | None, nodes: Path | None, policies: list[str], seeds: list[int],
                   out_dir: Path, command: str | None = None) -> int:  # fmt: skip
    from ops.bench.simulation import load_error
    from ops.cli.train import openb_fill_inputs
    from ops.reports import Report

    started = time.perf_counter()
    model, why = learned_version(policies)
    if why:
        console.print(f"[red]bench fill: {why}")
        return 2
    seen = seen_fill_seeds(seeds) if model else []
    if seen:
        console.print(f"[yellow]bench fill: the learned policy's model {model} was trained or validated on seeds "
                      f"{seen}: its numbers on them are inflated (use seeds it has not seen)")  # fmt: skip
    from scheduling.fill import fill_sequence, gpu_demand, run_fill
    from scheduling.metrics.fragmentation import Workload
    from scheduling.policies import get_policy

    try:  # strict: a benchmark does not run on a silently thinned pod list
        node_views, pod_list = openb_fill_inputs(pods, nodes)
    except (ValueError, OSError) as e:
        return load_error(console, e)
    workload = Workload.from_jobs(pod_list)
    capacity = sum(n.num_gpu for n in node_views) * 1000
    demand = sum(map(gpu_demand, pod_list)) / capacity
    console.print(f"{len(node_views):,} nodes, {capacity // 1000:,} GPUs; {len(pod_list):,} pods demanding "
                  f"{demand:.1%} of the GPU capacity")  # fmt: skip
    runs: list[dict[str, Any]] = []
    with Progress(TextColumn("[bold]fill"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[what]}"),
                  TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("fill", total=len(policies) * len(seeds), what="")
        for seed in seeds:
            seq = fill_sequence(pod_list, capacity, seed)
            for name in policies:
                bar.update(task, what=f"{name} seed {seed}")
                t0 = time.perf_counter()
                policy = get_policy(name, **policy_kwargs(name, seed, workload))
                r = run_fill(node_views, seq, policy, seed)
                # pods a model-backed policy's fallback scored (its backend failed): its row is not the model's alone
                fell_back = len(getattr(policy, "fallback_jobs", ()))
                if fell_back:
                    console.print(f"[yellow]bench fill: {name} seed {seed}: the fallback scored {fell_back:,} of "
                                  f"{len(seq):,} pods: its model's backend failed for them")  # fmt: skip
                runs.append({"policy": name, "seed": seed, "pods": len(seq), "placed": r.placed,
                             "dropped": r.dropped, "seconds": time.perf_counter() - t0, "fallback_scored": fell_back,
                             "curve": [r.allocated_at(x) for x in CURVE]})  # fmt: skip
                bar.advance(task)
    command = command or ("semsched bench fill" + (f" --pods {pods}" if pods else "")
                          + (f" --nodes {nodes}" if nodes else "")
                          + f" --policies {','.join(policies)} --seeds {','.join(map(str, seeds))}")  # fmt: skip
    report = Report(out_dir, "bench-fill", "openb fill benchmark: GPU allocated as pods arrive", command, started=started,
                    console=console)  # fmt: skip
    report.text(f"{len(node_views):,} nodes, {capacity // 1000:,} GPUs; {len(pod_list):,} pods demanding "
                f"{demand:.1%} of the GPU capacity, inflated to 130 %; none departs. Seeds {seeds}. "
                "Method: `../shared/benchmarks/openb-fill.md` (the FGD authors', Weng et al., USENIX ATC 2023). "
                "Their figures are their simulator's checked-in results for the default pod list "
                "(mean of seeds 42–51)." + (f" The learned policy's model: {model}." if model else "")
                + (f" **It was trained or validated on seeds {seen}: its numbers on them are inflated.**"
                   if seen else ""))  # fmt: skip
    rows = summary_rows(policies, runs)
    report.table(f"GPU allocated at 100 % arrived demand (mean of {len(seeds)} seeds)", rows,
                 ["policy", "theirs", "ours %", "± std", "theirs %", "Δ pp", "s / run"],
                 note="theirs = the FGD authors' policy and figure; Δ = ours − theirs; best-fit (ours: highest utilisation after placement, "
                      "GPU-weighted, per node capacity) is a different method from their BestFit "
                      "(best-fit-leftover).")  # fmt: skip
    with warnings.catch_warnings():  # an arrived % that no event rounds to (tiny pod lists) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        curves = {n: np.nanmean([r["curve"] for r in runs if r["policy"] == n], axis=0) for n in policies}
    report.table("GPU allocated (%) by arrived demand (%), mean over seeds",
                 [{"policy": n, **{f"{x}%": float(curves[n][x - 1]) for x in CHECKPOINTS}} for n in policies])
    report.line_plot("allocation", "GPU allocated vs arrived demand (mean over seeds)", "arrived GPU demand (%)",
                     "GPU allocated (%)", {n: (list(CURVE), curves[n].tolist()) for n in policies})  # fmt: skip
    tail = CURVE.index(80)
    report.line_plot("allocation-80-130", "GPU allocated vs arrived demand, 80–130 % (mean over seeds)",
                     "arrived GPU demand (%)", "GPU allocated (%)",
                     {n: (list(CURVE[tail:]), curves[n][tail:].tolist()) for n in policies})  # fmt: skip
    report.data("seeds", seeds)
    report.data("policies", rows)
    report.data("runs", runs)
    report.data("environment", environment())
    for path in report.write():
        console.print(f"wrote {path}")
    return 0


def summary_rows(policies: list[str], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per policy: mean and std of the value at 100 % arrived, beside the reference."""
    rows = []
    for name in policies:
        mine = [r for r in runs if r["policy"] == name]
        at100 = np.array([r["curve"][CURVE.index(100)] for r in mine])
        theirs, figure = REFERENCE.get(name, (None, None))
        mean = float(at100.mean())
        rows.append({"policy": name, "theirs": theirs, "ours %": mean, "± std": float(at100.std()),
                     "theirs %": figure, "Δ pp": None if figure is None else mean - figure,
                     "s / run": float(np.mean([r["seconds"] for r in mine]))})  # fmt: skip
    return rows
