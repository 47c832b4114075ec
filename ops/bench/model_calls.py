"""``semsched bench model-calls``: the learned policy's model calls per step on the worker's path.

The simulator's own path scores without ``prepare_step``: a step's first model call opens at the
first job that reaches scoring. The worker (``streams/loop.py``) instead orders the queue once
(:func:`scheduling.orderings.compose.queue_order`), awaits ``prepare_step`` — the call for the
step's first window, made before the step on the event loop, with a deadline — and then runs
``schedule_step(in_order=True)``. A window opened inside the step is a synchronous call: through
Triton it holds the worker's loop for a round trip. This replays a trace through the simulator
on the worker's path (:class:`WorkerPath`) for each model window size and counts, per run:

- **prepared calls**, and those made in **steps that placed nothing** (a call no decision used);
- **prepared, none placed**: steps that placed jobs, none of them covered by the prepared call;
- **in-step calls** (synchronous) and the **steps with in-step calls**;
- the replay's mean JCT and queueing, its wall time and the time in ``prepare_step``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.bench.model_check import model_pinned
from ops.console import wide_console
from scheduling.assign import StepResult, schedule_step
from scheduling.order_context import OrderContext
from scheduling.orderings.compose import queue_order
from scheduling.snapshot import ClusterSnapshot

console = wide_console()


@dataclass
class CallCounts:
    steps: int = 0
    placing_steps: int = 0
    prepared_calls: int = 0
    prepared_in_idle_steps: int = 0  # calls in steps that placed nothing
    prepared_none_placed: int = 0  # steps that placed jobs, none of them the prepared call's
    in_step_calls: int = 0
    steps_with_in_step_calls: int = 0
    prepare_s: float = 0.0


class WorkerPath:
    """A stand-in for ``schedule_step`` (its signature) that runs the worker's step for a policy that
    places with the learned model (``learned``, or an ordering composed with it), counting its calls."""

    def __init__(self, policy: Any) -> None:
        self.learned = getattr(policy, "placement", policy)  # the LearnedPolicy (a composed policy's placement)
        self.counts = CallCounts()
        self._loop = asyncio.new_event_loop()

    def __call__(self, snapshot: ClusterSnapshot, pending: Sequence[Any], policy: Any, *, now: float, top_k: int = 0,
                 context: OrderContext | None = None, **kwargs: Any) -> StepResult:  # fmt: skip
        ordered = queue_order(policy, pending, now, context)
        calls, c = self.learned.model_calls, self.counts
        started = time.perf_counter()
        if ordered:
            self._loop.run_until_complete(policy.prepare_step(snapshot, ordered, now))
        c.prepare_s += time.perf_counter() - started
        prepared = self.learned.model_calls - calls
        result = schedule_step(snapshot, ordered, policy, now=now, top_k=top_k, context=context, in_order=True,
                               **kwargs)  # fmt: skip
        in_step = self.learned.model_calls - calls - prepared
        c.steps += 1
        c.prepared_calls += prepared
        c.in_step_calls += in_step
        c.steps_with_in_step_calls += in_step > 0
        if not result.placements:
            c.prepared_in_idle_steps += prepared
            return result
        c.placing_steps += 1
        windows = self.learned.windows.calls
        if prepared and windows and not any(p.job_id in windows[0].index for p in result.placements):
            c.prepared_none_placed += 1
        return result

    def close(self) -> None:
        self._loop.close()


@model_pinned
def run_model_calls_bench(*, trace: str, path: Path | None, policy: str, windows: list[int], load: str, step: float,
                          limit: int | None, nodes: int | None, seed: int, out_dir: Path, command: str) -> int:  # fmt: skip
    from ops.bench import environment
    from ops.bench.model_check import learned_version
    from ops.bench.simulation import load_for_bench, parse_load
    from ops.reports import Report
    from scheduling.duration_estimate import estimator_for
    from scheduling.policies import get_policy
    from scheduling.simulator import SimConfig, simulate

    started = time.perf_counter()
    model, why = learned_version([policy])
    if why or model is None:
        console.print(f"[red]bench model-calls: {why or f'{policy} does not place with the learned model'}")
        return 2
    workload = load_for_bench(console, trace, path, limit, nodes, seed)
    if isinstance(workload, int):
        return workload
    try:
        load_name, plan = parse_load(load, workload)
    except ValueError as e:
        console.print(f"[red]{escape(str(e))}")
        return 2
    jobs = workload.scaled(plan.factor, plan.copies)
    config = SimConfig(step_s=step, load_factor=plan.factor, seed=seed)
    rows: list[dict[str, Any]] = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        for window in windows:
            task = bar.add_task(f"{policy}, window {window or 'all'}", total=len(jobs))
            p = get_policy(policy, window=window)
            worker = WorkerPath(p)
            try:
                result = simulate(workload.nodes, jobs, p, config, estimator=estimator_for(p), step=worker,
                                  progress=lambda done, total, t=task: bar.update(t, completed=done))  # fmt: skip
            finally:
                worker.close()
                worker.learned.close()
            bar.remove_task(task)
            summary = result.summary()
            rows.append({"window": window or "all", **asdict(worker.counts), "jct_mean": summary["jct_mean"],
                         "queue_mean": summary["queue_mean"], "wall_s": result.wall_s})  # fmt: skip
            console.print(f"  window {window or 'all'}: {worker.counts.prepared_calls:,} prepared and "
                          f"{worker.counts.in_step_calls:,} in-step calls over {worker.counts.steps:,} steps, "
                          f"{result.wall_s:.1f} s")  # fmt: skip
    report = Report(out_dir, f"bench-model-calls-{trace}", f"Model calls per step on the worker's path: {trace}",
                    command, started=started, console=console)  # fmt: skip
    report.text(f"**{trace}**: {len(workload.nodes):,} nodes, {len(jobs):,} jobs at load **{load_name}** "
                f"(arrivals ×{plan.factor:,.4g}); policy `{policy}`, model {model}. Each step as the worker runs it: "
                "the queue ordered once, `prepare_step` (the first window's call), then `schedule_step` in that "
                "order; 'in-step calls' are the windows opened within the step (synchronous: through Triton a "
                "round trip on the worker's event loop). 'prepared in idle steps': calls in steps that placed "
                "nothing; 'prepared none placed': steps that placed jobs, none of them covered by the prepared call.")  # fmt: skip
    report.table("Model calls", rows, list(rows[0]))
    report.data("rows", rows)
    report.data("environment", environment())
    for out in report.write():
        console.print(f"wrote {out}")
    return 0
