"""``semsched bench learned``: decision latency of the learned scorer, in-process on CPU.

On the 1,213 openb GPU nodes, loaded to ~70 % of their GPUs (the openb fill sequence of
seed 0 placed by best-fit), with N pending openb pods, ``repeat`` times after a warm-up:

- **model step** (the issue's "decision latency per scheduling step"): everything the learned
  policy computes for one step, batched over the N jobs — node features and the fusion
  encoder once, job features, the pair features of every (job, node), the policy head over
  all N × nodes — as one would call a model server once per step. Broken down into
  the inputs (features; pair features once per distinct job shape) and the model; the filters'
  masks are timed separately (they are the scheduling core's, shared with every policy).
- **schedule_step**: :func:`scheduling.assign.schedule_step` with the ``learned`` policy and,
  for comparison, other policies — the sequential path the worker runs (filter, score,
  reserve, one job after another), which re-scores every job on the reduced capacity.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ops.bench import environment, percentiles
from ops.bench.model_check import model_pinned
from ops.console import wide_console

console = wide_console()


def loaded_cluster(fraction: float = 0.7, seed: int = 0) -> tuple[Any, list[Any]]:
    """The openb snapshot after best-fit placed the fill sequence up to ``fraction`` of the GPUs; the pods."""
    from inference.training.step_latency import loaded_snapshot
    from ops.cli.train import openb_fill_inputs

    nodes, pods = openb_fill_inputs()
    return loaded_snapshot(nodes, pods, fraction, seed), pods


def model_step(policy: Any, snap: Any, jobs: list[Any]) -> dict[str, float]:
    """One step's model call (ms) as promotion times it
    (:func:`inference.training.step_latency.model_step`: ``inputs``, ``model``, ``model step``),
    plus ``filters``: the feasibility masks, timed apart (the scheduling core's, every policy's)."""
    from inference.features.step import feasibility
    from inference.training.step_latency import model_step as timed_model_step

    parts = timed_model_step(policy, snap, jobs)
    t0 = time.perf_counter()
    feasibility(jobs, snap)
    return parts | {"filters": (time.perf_counter() - t0) * 1000.0}


@model_pinned
def run_learned_bench(*, model_dir: Path | None, pending: list[int], repeat: int, compare: list[str], out_dir: Path,
                      command: str, churn: int = 16) -> int:  # fmt: skip
    import torch

    import inference  # noqa: F401  (registers "learned")
    from inference.policy import LearnedPolicy
    from inference.training.step_latency import consecutive_steps, frozen_heap
    from ops.reports import Report
    from scheduling.assign import schedule_step
    from scheduling.policies import get_policy

    started = time.perf_counter()
    policy = LearnedPolicy(model_dir)
    if policy.fell_back:
        console.print(f"[red]no model: {policy.fallback_reason}[/red]")
        return 1
    snap, pods = loaded_cluster()
    used = 1 - snap.gpu_free_milli.sum() / snap.gpu_cap_milli.sum()
    rows: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    for n in pending:
        jobs = [pods[i % len(pods)] for i in range(n)]
        samples: dict[str, list[float]] = {}
        with frozen_heap():  # as the churned rows and the worker run (found by review: these ran without it)
            for r in range(repeat + 1):
                parts = model_step(policy, snap, jobs)
                if r:
                    for k, v in parts.items():
                        samples.setdefault(k, []).append(v)
        if churn > 0:  # consecutive steps, placements and departures between them, pair features kept
            churned = consecutive_steps(policy, snap, pods, pending=n, steps=repeat, churn=churn)
            samples |= {f"churned: {k}" + (" (count)" if k in ("changed nodes", "new shapes") else ""): v
                        for k, v in churned.items()}  # fmt: skip
        for name in ["learned", *compare]:
            p = policy if name == "learned" else get_policy(name)
            with frozen_heap():
                times = [schedule_step(snap, jobs, p, now=0.0, top_k=0).compute_ms
                         for _ in range(min(repeat, 5) + 1)][1:]  # fmt: skip
            samples[f"schedule_step {name}"] = times
        for what, values in samples.items():
            stats = percentiles(values)
            # (a p99 of fewer than 100 samples is their largest, interpolated: found by review, 5 steps gave one)
            rows.append({"pending": n, "what": what, "p50 ms": stats["p50"],
                         "p99 ms": stats["p99"] if (stats["n"] or 0) >= 100 else None, "max ms": stats["max"],
                         "mean ms": stats["mean"], "n": stats["n"]})  # fmt: skip
        raw[str(n)] = samples
    report = Report(out_dir, "bench-learned", "Learned scorer: decision latency per step (in-process, CPU)", command,
                    started=started, console=console)  # fmt: skip
    report.text(f"Model {policy.model_version} ({sum(p.numel() for p in policy.loaded.model.parameters()):,} "
                f"parameters, torch {torch.__version__}, {torch.get_num_threads()} thread). 1,213 openb GPU nodes "
                f"with {used:.0%} of their GPUs allocated (best-fit on the fill sequence of seed 0); N pending openb "
                "pods. 'model step' = the step's inputs (features) + one model call (fusion encoder once, the head over N × 1,213) (the "
                "decision latency of the issue's target); 'filters' = the feasibility masks (the scheduling core's); "
                "'schedule_step <policy>' = the worker's sequential path (filter, score, reserve per job; the learned "
                f"policy calls its model for windows of {policy.window or 'all'} jobs of the step's order, "
                "SEMSCHED_MODEL_WINDOW, while 'model step' is one call over all N). "
                f"'churned: …' = {repeat} consecutive steps with the policy's pair cache, each followed by "
                f"{churn} best-fit placements, {churn} arrivals and {churn} departures (inference/training/step_latency.py): "
                "'changed nodes' and 'new shapes' say how much the cache had to recompute.")  # fmt: skip
    report.table("Per-step latency (ms)", rows, ["pending", "what", "p50 ms", "p99 ms", "max ms", "mean ms", "n"],
                 note="p99 only over 100 samples or more ('–' below: read max).")  # fmt: skip
    report.data("rows", rows)
    report.data("samples", raw)
    report.data("model_version", policy.model_version)
    report.data("environment", environment())
    for path in report.write():
        console.print(f"wrote {path}")
    return 0
