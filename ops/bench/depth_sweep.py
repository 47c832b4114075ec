"""The depth sweep of ``semsched bench sweep``: the learned policy at fusion-encoder depth 2..10.

A model's depth is fixed when it is trained, so the sweep takes one trained model directory
per depth (each ``config.json`` says ``model.depth``) and measures each the same way:

- **fill allocation**: the openb fill benchmark (``ops/bench/fill.py``'s method: the fill
  sequence of each seed, :func:`scheduling.fill.run_fill`, GPU allocated at 100 % arrived
  demand), mean and spread over the chosen seeds (a few of the held-out 42–51);
- **model step latency**: the model step (features + one in-process model call) for N pending
  openb pods (default 256) on the 1,213 openb GPU nodes loaded to ~70 %, timed as promotion
  times it (:func:`inference.training.step_latency.consecutive_steps`: consecutive steps with the
  pair cache and 16 placements, arrivals and departures between two), p50 / p99 over
  ``repeat`` steps, taken in rounds of :data:`ROUND` steps over the models.

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

ROUND = 10  # consecutive steps of one model before the next model's (rounds: load that comes and goes hits all)
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

    from inference.training.step_latency import consecutive_steps
    from ops.bench.learned import loaded_cluster
    from ops.cli.train import fill_inputs_or_exit
    from scheduling.fill import fill_sequence, run_fill

    node_views, pod_list = fill_inputs_or_exit(pods, nodes)
    capacity = sum(n.num_gpu for n in node_views) * 1000
    sequences = {s: fill_sequence(pod_list, capacity, s) for s in seeds}
    with console.status("loading the openb cluster for the latency steps…"):
        snap, openb_pods = loaded_cluster()
    columns = (TextColumn("[bold]depth sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[what]}"),
               TimeElapsedColumn())  # fmt: skip
    fills: dict[Path, tuple[list[float], list[float]]] = {}  # model -> allocation % and seconds per seed
    with Progress(*columns, console=console) as bar:
        rounds = max(1, -(-repeat // ROUND))
        task = bar.add_task("depth", total=len(models) * len(seeds) + rounds, what="")
        for model_dir in models:
            alloc, seconds = fills.setdefault(model_dir, ([], []))
            for s in seeds:
                bar.update(task, what=f"depth {model_depth(model_dir)}: fill seed {s}")
                t0 = time.perf_counter()
                alloc.append(run_fill(node_views, sequences[s], _policy(model_dir), s).allocated_at(100))
                seconds.append(time.perf_counter() - t0)
                bar.advance(task)
        # latency in rounds of ROUND consecutive steps per model: on a shared machine, load that
        # comes and goes then weighs on every depth alike
        policies = {d: _policy(d) for d in models}
        times: dict[Path, dict[str, list[float]]] = {d: {} for d in models}
        for r in range(rounds):
            bar.update(task, what=f"latency round {r + 1}/{rounds} ({pending} pending)")
            for d, policy in policies.items():
                steps = min(ROUND, repeat - r * ROUND)
                got = consecutive_steps(policy, snap, openb_pods, pending=pending, steps=steps, churn=16, seed=r)
                for name, values in got.items():
                    times[d].setdefault(name, []).extend(values)
            bar.advance(task)
    rows: list[dict[str, Any]] = []
    for d, policy in policies.items():
        samples, (alloc, seconds) = times[d], fills[d]
        step, core = percentiles(samples["model step"]), percentiles(samples["model"])
        rows.append({"depth": model_depth(d), "model": policy.model_version, "dir": str(d),
                     "parameters": sum(p.numel() for p in policy.loaded.model.parameters()),
                     "alloc %": float(np.mean(alloc)), "± std": float(np.std(alloc)), "alloc_by_seed": alloc,
                     "step p50 ms": step["p50"], "step p99 ms": step["p99"], "model p50 ms": core["p50"],
                     "step_ms": samples["model step"], "s / fill run": float(np.mean(seconds))})  # fmt: skip
    rows.sort(key=lambda r: r["depth"])
    report.text(f"**Depth sweep**: the learned policy at fusion-encoder depth "
                f"{', '.join(str(r['depth']) for r in rows)} (one trained model each). *alloc %* = GPU allocated at "
                f"100 % arrived demand on the openb fill benchmark ({len(node_views):,} nodes, {len(pod_list):,} "
                f"pods), mean ± std over seeds {list(seeds)}. *step* = features + one in-process model call for "
                f"{pending} pending openb pods on the 1,213 openb GPU nodes at {1 - snap.gpu_free_milli.sum() / snap.gpu_cap_milli.sum():.0%} GPU "
                f"allocation, p50 / p99 of {repeat} consecutive steps with the pair cache and 16 placements, arrivals "
                f"and departures between two (as promotion times them; in rounds of {ROUND} steps over the models); "
                "*model* = the model call alone (the fusion encoder once over the nodes, the head over every (job, node)); "
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
