"""``semsched bench step``: the in-process compute time of one scheduling step.

For each policy and each pending-queue size N, :func:`scheduling.assign.schedule_step`
places the first N openb pods (submit order, as the worker would see them) on the empty
cluster of the 1,213 openb GPU nodes, ``repeat`` times after one warm-up step. Reported
per (policy, N): the step's own ``compute_ms`` (p50 / p99 / mean / min over the repeats),
the wall time around the call, and the placements / unschedulable jobs of one step.

This is the same code path the worker runs each tick (snapshot copy, order, filter,
score, assign); it excludes reading the Faust tables and publishing the commands, which
``semsched bench pipeline`` measures end to end.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops.bench import fmt, percentiles, show_and_write
from ops.bench.model_check import learned_version, model_pinned
from ops.console import wide_console

console = wide_console()


def parse_sizes(text: str, option: str = "--pending", minimum: int = 1) -> list[int]:
    try:
        sizes = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated integers, not {text!r}") from None
    if not sizes or any(n < minimum for n in sizes):
        raise ValueError(f"{option} needs at least one size, all >= {minimum}")
    return sizes


def load_openb(max_pending: int) -> tuple[Any, list[Any]]:
    """The openb snapshot (1,213 GPU nodes) and ``max_pending`` pods as ``JobRequest``s
    (cycled with unique ids if the trace has fewer)."""
    from dataclasses import replace

    from ops.traces.registry import get_loader
    from scheduling.job import JobRequest
    from scheduling.node import NodeView
    from scheduling.snapshot import ClusterSnapshot

    loader = get_loader("openb")
    snap = ClusterSnapshot.from_nodes([NodeView.from_telemetry(n) for n in loader.nodes()])
    trace = loader.load_jobs()
    jobs = []
    for i in range(max_pending):
        tj = trace[i % len(trace)]
        req = JobRequest.from_event(tj.event, submit_time=tj.offset_s)
        jobs.append(req if i < len(trace) else replace(req, job_id=f"{req.job_id}~{i // len(trace)}"))
    return snap, jobs


@model_pinned
def run_step_bench(*, pending: list[int], policies: list[str] | None, repeat: int, out: Path | None) -> int:
    from scheduling.assign import schedule_step
    from scheduling.policies import available_policies, get_policy
    from scheduling.policies.registry import is_policy_name

    names = policies or available_policies()
    unknown = sorted(n for n in names if not is_policy_name(n))
    if unknown:
        console.print(f"[red]unknown policies {unknown}; available: {', '.join(available_policies())}")
        return 2
    if repeat < 1:
        console.print("[red]--repeat must be >= 1")
        return 2
    _, why = learned_version(names)
    if why:
        console.print(f"[red]bench step: {why}")
        return 2
    console.rule("[bold]semsched bench step")
    with console.status("loading the openb trace…"):
        snap, jobs = load_openb(max(pending))
    console.print(f"openb: {snap.num_nodes:,} nodes; pending sizes {pending}; policies {names}; "
                  f"{repeat} repeats after 1 warm-up step each")  # fmt: skip
    rows: list[dict[str, Any]] = []
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:  # fmt: skip
        task = bar.add_task("steps", total=len(names) * len(pending) * (repeat + 1))
        for name in names:
            policy = get_policy(name)
            for n in pending:
                batch = jobs[:n]
                bar.update(task, description=f"{name} pending={n}")
                res = schedule_step(snap, batch, policy, now=0.0)  # warm-up (caches, imports)
                bar.advance(task)
                compute, wall = [], []
                for _ in range(repeat):
                    t = time.perf_counter()
                    res = schedule_step(snap, batch, policy, now=0.0)
                    wall.append((time.perf_counter() - t) * 1000)
                    compute.append(res.compute_ms)
                    bar.advance(task)
                c = percentiles(compute)
                rows.append({
                    "policy": name, "nodes": snap.num_nodes, "pending": len(batch),
                    "placements": len(res.placements), "unschedulable": len(res.unschedulable),
                    "compute_ms": c, "wall_ms": percentiles(wall),
                    "placements_per_s": len(res.placements) / (c["p50"] / 1000) if c["p50"] else None,
                })  # fmt: skip
    table = Table(
        title=f"one scheduling step, openb ({snap.num_nodes:,} nodes, empty cluster), {repeat} repeats"
    )
    table.add_column("policy", no_wrap=True)
    for col in ("pending", "placed", "unsched", "p50 ms", "p99 ms", "mean ms", "min ms", "placed/s"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        c = r["compute_ms"]
        table.add_row(r["policy"], fmt(r["pending"]), fmt(r["placements"]), fmt(r["unschedulable"]), fmt(c["p50"]),
                      fmt(c["p99"]), fmt(c["mean"]), fmt(c["min"]), fmt(r["placements_per_s"], 0))  # fmt: skip
    show_and_write(console, table, "compute ms = StepResult.compute_ms (snapshot copy + order + filter + score + "
                   "assign); placed/s = placements / p50; p99 over few repeats is close to the max.", out, "step",
                   {"trace": "openb", "repeat": repeat, "results": rows})
    return 0
