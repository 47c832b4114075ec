"""``semsched bench damping``: what churn damping (``score − stability · Δ``) costs per model step.

A model that damps churn computes the self-correction Δ for the step's fitting (job, node) pairs
through its transition model T (:meth:`inference.model.scorer.Scorer.step_delta`). This times the
model step the promotion gate times (:func:`inference.training.step_latency.measure_step_latency`:
consecutive churned steps, pair features kept) on the 1,213 openb GPU nodes loaded to 70 % of their
GPUs, N pending openb pods, for fresh models (the weights do not change the work) that differ only
in ``stability``; a model with ``stability`` 0 has the same T, unused at decision time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ops.bench import environment
from ops.console import wide_console

console = wide_console()


def run_damping_bench(*, stabilities: list[float], pending: int, repeat: int, hidden: int, out_dir: Path,
                      command: str, pods: Path | None = None, nodes: Path | None = None) -> int:  # fmt: skip
    import torch

    from inference.model import ModelConfig, Scorer
    from inference.model.io import LoadedModel
    from inference.policy import LearnedPolicy
    from inference.training.step_latency import LatencyProbe, measure_step_latency
    from ops.cli.train import fill_inputs_or_exit
    from ops.cli.train_spec import policy_spec
    from ops.reports import Report

    started = time.perf_counter()
    node_views, pod_list = fill_inputs_or_exit(pods, nodes)  # (a file it cannot read: one line, exit 2)
    spec, _ = policy_spec(node_views, pod_list)
    probe = LatencyProbe.build(node_views, pod_list, pending=pending, load=0.7, repeat=repeat)
    rows: list[dict[str, Any]] = []
    for stability in stabilities:
        torch.manual_seed(0)
        config = ModelConfig(spec=spec, hidden=hidden, depth=2, head_rank=4, cost_dim=2, transition=True,
                             stability=stability)  # fmt: skip
        policy = LearnedPolicy(loaded=LoadedModel(Scorer(config).eval(), config, f"fresh-s{stability:g}", Path(".")))
        with console.status(f"stability {stability:g}: {repeat} steps…"):
            r = measure_step_latency(policy, probe)
        rows.append({"stability": stability, "p50 ms": r["p50_ms"], "p99 ms": r["p99_ms"],
                     "model p50 ms": r["model_p50_ms"], "inputs p50 ms": r["inputs_p50_ms"],
                     "threads": r["torch_threads"]})  # fmt: skip
    report = Report(out_dir, "bench-damping", "Churn damping: the model step with and without Δ", command,
                    started=started, console=console)  # fmt: skip
    report.text(f"{len(node_views):,} nodes loaded to 70 % of their GPUs, {pending} pending pods, {repeat} consecutive "
                f"churned steps (the promotion gate's model step); fresh models, hidden {hidden}, head rank 4, ψ and "
                "T, differing only in stability (Δ computed on the fitting pairs: Scorer.step_delta).")  # fmt: skip
    report.table("Model step (ms)", rows, ["stability", "p50 ms", "p99 ms", "model p50 ms", "inputs p50 ms", "threads"])
    report.data("rows", rows)
    report.data("environment", environment())
    for path in report.write():
        console.print(f"wrote {path}")
    return 0
