"""The depth sweep of ``semsched bench sweep``: the learned policy at fusion-encoder depth 2..10.

A model's depth is fixed when it is trained, so the sweep takes one trained model directory
per depth (each ``config.json`` says ``model.depth``) and measures each the same way:

- **fill allocation**: the openb fill benchmark (``ops/bench/fill.py``'s method: the fill
  sequence of each seed, :func:`scheduling.fill.run_fill`, GPU allocated at 100 % arrived
  demand), mean and spread over the chosen seeds (a few of the held-out 42–51);
- **model step latency**: ``ops/bench/learned.py``'s model step (features + one in-process
  model call) for N pending openb pods (default 256) on the 1,213 openb GPU nodes loaded to
  ~70 %, p50 / p99 over ``repeat`` steps after a warm-up.

Everything runs on the in-process torch backend, whatever ``$SEMSCHED_INFERENCE`` says: the
sweep compares models, not servers. Training the series (``semsched train --depth N``, one
directory per depth) is separate; the exact commands are in ``semsched bench sweep --help``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.bench import percentiles
from ops.reports import Report

COLUMNS = ["depth", "model", "parameters", "alloc %", "± std", "step p50 ms", "step p99 ms", "model p50 ms",
           "s / fill run"]  # fmt: skip


def model_depth(model_dir: Path) -> int:
    """The fusion-encoder depth a model was trained with (``config.json``: ``model.depth``)."""
    meta = json.loads((Path(model_dir) / "config.json").read_text())
    return int(meta["model"]["depth"])


def _policy(model_dir: Path) -> Any:
    from inference.policy import LearnedPolicy

    return LearnedPolicy(model_dir, backend="in-process")


def check_models(models: Sequence[Path]) -> str | None:
    """Why the sweep cannot run on these directories (None when every one loads)."""
    if not models:
        return "the depth sweep needs --models DIR,DIR,... (one trained model per depth)"
    for d in models:
        try:
            model_depth(d)
        except (OSError, ValueError, KeyError) as e:
            return f"{d}: no model config ({type(e).__name__}: {e})"
        policy = _policy(d)
        if policy.fell_back:
            return f"{d}: the model does not load ({policy.fallback_reason})"
    return None


def run_depth_sweep(report: Report, console: Console, *, models: Sequence[Path], seeds: Sequence[int],
                    pending: int = 256, repeat: int = 7, pods: Path | None = None,
                    nodes: Path | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Measure every model; add the table and the two plots to ``report``; the rows (by depth)."""
    import torch

    from ops.bench.learned import loaded_cluster, model_step
    from ops.cli.train import openb_fill_inputs
    from scheduling.fill import fill_sequence, run_fill

    node_views, pod_list = openb_fill_inputs(pods, nodes)
    capacity = sum(n.num_gpu for n in node_views) * 1000
    sequences = {s: fill_sequence(pod_list, capacity, s) for s in seeds}
    with console.status("loading the openb cluster for the latency steps…"):
        snap, openb_pods = loaded_cluster()
    jobs = [openb_pods[i % len(openb_pods)] for i in range(pending)]
    columns = (TextColumn("[bold]depth sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[what]}"),
               TimeElapsedColumn())  # fmt: skip
    fills: dict[Path, tuple[list[float], list[float]]] = {}  # model -> allocation % and seconds per seed
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("depth", total=len(models) * len(seeds) + repeat + 1, what="")
        for model_dir in models:
            alloc, seconds = fills.setdefault(model_dir, ([], []))
            for s in seeds:
                bar.update(task, what=f"depth {model_depth(model_dir)}: fill seed {s}")
                t0 = time.perf_counter()
                alloc.append(run_fill(node_views, sequences[s], _policy(model_dir), s).allocated_at(100))
                seconds.append(time.perf_counter() - t0)
                bar.advance(task)
        # latency in rounds, one step of every model per round (the first a warm-up): on a shared
        # machine, load that comes and goes then weighs on every depth alike
        policies = {d: _policy(d) for d in models}
        times: dict[Path, list[dict[str, float]]] = {d: [] for d in models}
        for r in range(repeat + 1):
            bar.update(task, what=f"latency round {r}/{repeat} ({pending} pending)")
            for d, policy in policies.items():
                times[d].append(model_step(policy, snap, jobs))
            bar.advance(task)
    rows: list[dict[str, Any]] = []
    for d, policy in policies.items():
        steps, (alloc, seconds) = times[d][1:], fills[d]
        step, core = percentiles([t["model step"] for t in steps]), percentiles([t["model"] for t in steps])
        rows.append({"depth": model_depth(d), "model": policy.model_version, "dir": str(d),
                     "parameters": sum(p.numel() for p in policy.loaded.model.parameters()),
                     "alloc %": float(np.mean(alloc)), "± std": float(np.std(alloc)), "alloc_by_seed": alloc,
                     "step p50 ms": step["p50"], "step p99 ms": step["p99"], "model p50 ms": core["p50"],
                     "step_ms": [t["model step"] for t in steps], "s / fill run": float(np.mean(seconds))})  # fmt: skip
    rows.sort(key=lambda r: r["depth"])
    report.text(f"**Depth sweep**: the learned policy at fusion-encoder depth "
                f"{', '.join(str(r['depth']) for r in rows)} (one trained model each). *alloc %* = GPU allocated at "
                f"100 % arrived demand on the openb fill benchmark ({len(node_views):,} nodes, {len(pod_list):,} "
                f"pods), mean ± std over seeds {list(seeds)}. *step* = features + one in-process model call for "
                f"{pending} pending openb pods on the 1,213 openb GPU nodes at {1 - snap.gpu_free_milli.sum() / snap.gpu_cap_milli.sum():.0%} GPU "
                f"allocation, p50 / p99 of {repeat} steps after a warm-up (in rounds: one step of every model per round); *model* = the model call alone (the fusion encoder once over the nodes, the head over every (job, node)); "
                f"torch {torch.__version__}, {torch.get_num_threads()} thread(s). Latency on a shared machine "
                "varies with the other load on it.")  # fmt: skip
    report.table("Sweep: depth (learned policy)", rows, COLUMNS)
    xs = [float(r["depth"]) for r in rows]
    report.line_plot("depth-allocation", "depth sweep: GPU allocated at 100 % arrived (openb fill)",
                     "fusion-encoder depth", "GPU allocated (%)", {"learned": (xs, [r["alloc %"] for r in rows])})
    report.line_plot("depth-latency", f"depth sweep: model step latency, {pending} pending × 1,213 nodes",
                     "fusion-encoder depth", "ms", {"p50": (xs, [r["step p50 ms"] for r in rows]),
                                                    "p99": (xs, [r["step p99 ms"] for r in rows])})  # fmt: skip
    return rows
