"""``semsched bench fill``: the openb fill benchmark (method in ``scheduling/fill.py`` and
``../shared/benchmarks/openb-fill.md``), every policy over every seed, beside the FGD
authors' checked-in figures. Writes a JSON result and a markdown report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops.bench import environment, write_json

console = Console()

#: allocated GPU at 100 % arrived, default openb pod list, mean of seeds 42–51 (their repository)
REFERENCE = {"random": 86.30, "dot-product": 90.62, "gpu-clustering": 91.65, "gpu-packing": 91.78,
             "best-fit": 92.86, "fgd": 95.23}  # fmt: skip


def run_fill_bench(*, pods: Path | None, nodes: Path | None, policies: list[str], seeds: list[int],
                   out_dir: Path) -> int:  # fmt: skip
    from ops.traces import get_loader
    from scheduling.fill import fill_sequence, gpu_demand, run_fill
    from scheduling.job import JobRequest
    from scheduling.node import NodeView
    from scheduling.policies import get_policy

    loader = get_loader("openb", path=pods, **({"nodes_path": nodes} if nodes else {}))
    # one cluster for the benchmark: the pods' cluster is the nodes'
    node_views = [NodeView(node_id=n.node_id, cpu_milli=n.cpu_milli, memory_mib=n.memory_mib, num_gpu=n.num_gpu,
                           gpu_model=n.gpu_model) for n in loader.nodes()]  # fmt: skip
    pod_list = [JobRequest.from_event(tj.event.model_copy(update={"cluster": "default"})) for tj in loader.jobs()]
    capacity = sum(n.num_gpu for n in node_views) * 1000
    console.print(f"{len(node_views):,} nodes, {capacity // 1000:,} GPUs; {len(pod_list):,} pods demanding "
                  f"{sum(map(gpu_demand, pod_list)) / capacity:.1%} of the GPU capacity")  # fmt: skip
    runs: list[dict[str, Any]] = []
    with Progress(TextColumn("[bold]fill"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[what]}"),
                  TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("fill", total=len(policies) * len(seeds), what="")
        for seed in seeds:
            seq = fill_sequence(pod_list, capacity, seed)
            for name in policies:
                bar.update(task, what=f"{name} seed {seed}")
                t0 = time.perf_counter()
                r = run_fill(node_views, seq, get_policy(name), seed)
                runs.append({"policy": name, "seed": seed, "pods": len(seq), "placed": r.placed,
                             "dropped": r.dropped, "seconds": time.perf_counter() - t0,
                             "allocated_at": {str(x): r.allocated_at(x) for x in range(50, 131, 10)}})  # fmt: skip
                bar.advance(task)
    rows = []
    for name in policies:
        mine = [r for r in runs if r["policy"] == name]
        at100 = np.array([r["allocated_at"]["100"] for r in mine])
        rows.append({"policy": name, "allocated_at_100_mean": float(at100.mean()),
                     "allocated_at_100_std": float(at100.std()), "reference": REFERENCE.get(name),
                     "seconds_per_run": float(np.mean([r["seconds"] for r in mine]))})  # fmt: skip
    table = Table(title=f"openb fill: GPU allocated at 100% arrived demand (mean of {len(seeds)} seeds)")
    for col in ("policy", "semsched", "± std", "FGD authors' figure", "s / run"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in rows:
        table.add_row(r["policy"], f"{r['allocated_at_100_mean']:.2f}%", f"{r['allocated_at_100_std']:.2f}", _ref(r),
                      f"{r['seconds_per_run']:.1f}")  # fmt: skip
    console.print(table)
    result = {"bench": "fill", "seeds": seeds, "policies": rows, "runs": runs, "environment": environment()}
    out_dir.mkdir(parents=True, exist_ok=True)
    console.print(f"wrote {write_json(out_dir / 'bench-fill.json', result)}")
    md = ["# openb fill benchmark", "", f"Seeds {seeds}; GPU allocated at 100 % arrived demand.", "",
          "| policy | semsched | ± std | FGD authors' figure |", "|---|---|---|---|"]  # fmt: skip
    md += [f"| {r['policy']} | {r['allocated_at_100_mean']:.2f}% | {r['allocated_at_100_std']:.2f} | {_ref(r)} |"
           for r in rows]
    (out_dir / "bench-fill.md").write_text("\n".join(md) + "\n")
    console.print(f"wrote {out_dir / 'bench-fill.md'}")
    return 0


def _ref(row: dict[str, Any]) -> str:
    return "—" if row["reference"] is None else f"{row['reference']:.2f}%"
