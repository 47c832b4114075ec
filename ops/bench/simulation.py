"""What ``bench trace`` and ``bench sweep`` share: a trace turned into the simulator's
workload, load levels and heterogeneity levels parsed from the command line, and one
simulated run per policy under a rich progress bar."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.traces.base import TraceLineError
from scheduling.duration_estimate import estimator_for
from scheduling.policies import get_policy
from scheduling.simulator import (
    HETEROGENEITY_LEVELS,
    LOAD_LEVELS,
    LoadPlan,
    SimConfig,
    SimJob,
    SimResult,
    Workload,
    build_workload,
    offered_peak,
    plan_load,
    simulate,
)

#: the default comparison: every placement under FIFO, and the orderings on best-fit
DEFAULT_POLICIES = ["random", "fifo-first-fit", "least-allocated", "dot-product", "gpu-packing", "gpu-clustering",
                    "best-fit", "fgd", "sjf-oracle+best-fit", "sjf-predicted+best-fit", "las+best-fit", "priority+best-fit",
                    "drf+best-fit"]  # fmt: skip


def load_trace_workload(trace: str, path: Path | None = None, limit: int | None = None,
                        nodes: int | None = None, seed: int = 0, **options: Any) -> Workload:  # fmt: skip
    """The simulator's workload from a registered trace loader (``semsched replay`` names).
    ``nodes``: keep a seeded sample of that many nodes (in their order) — for a trace slice
    far smaller than its cluster (one Google 2011 file holds 1/500 of the task events but
    every machine). ``options``: the loader's own (``-o`` of ``semsched replay``). Strict: a bad line raises :class:`~ops.traces.base.TraceLineError`
    (FILE:LINE: reason) — a benchmark does not run on a silently thinned trace."""
    from ops.traces.registry import get_loader

    loader = get_loader(trace, path, limit=limit, strict=True, **options)
    jobs = loader.load_jobs()
    workload = build_workload(loader.nodes(), ((j.offset_s, j.event) for j in jobs))
    workload.notes = dict(loader.stats.notes)  # (found by review: the reports said only what the simulator left out)
    if nodes is not None and 0 < nodes < len(workload.nodes):
        keep = np.sort(np.random.default_rng([seed, 104729]).choice(len(workload.nodes), nodes, replace=False))
        workload.nodes = [workload.nodes[i] for i in keep]
    return workload


def load_for_bench(console: Console, trace: str, path: Path | None, limit: int | None, nodes: int | None,
                   seed: int, **options: Any) -> Workload | int:  # fmt: skip
    """:func:`load_trace_workload`, or the exit code after saying why it could not (a bad
    line: FILE:LINE: reason, exit 1; an unknown trace or a missing file: exit 2)."""
    try:
        with console.status(f"loading {trace}…"):
            workload = load_trace_workload(trace, path, limit, nodes, seed, **options)
    except (ValueError, OSError) as e:
        return load_error(console, e)
    if not workload.jobs or not workload.nodes:  # (no nodes: nothing placed nor rejected, 'finished 0', exit 0)
        console.print(f"[red]{trace}: {'no job with a run time to replay' if not workload.jobs else 'no nodes'}")
        return 1
    return workload


def load_error(console: Console, e: Exception) -> int:
    """Say why a trace could not be loaded; the exit code: a bad line (``FILE:LINE: reason``) 1,
    anything else (an unknown trace, bad options) 2."""
    if isinstance(e, TraceLineError):
        console.print(f"[red]{'bad trace line: ' if e.line > 0 else ''}{escape(str(e))}")
        return 1
    console.print(f"[red]{escape(str(e))}")
    return 2


def load_factor(text: str) -> float | None:
    """What a load names, checked before anything loads: None for ``native`` or a level name
    (``low`` … ``extreme``), the factor of ``250x``; else ValueError with what it may be."""
    text = text.strip().lower()
    if text == "native" or text in LOAD_LEVELS:
        return None
    if text.endswith("x"):
        try:
            factor = float(text[:-1])
        except ValueError:
            factor = math.nan
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"load factor must be a finite number > 0, like 250x; not {text!r}")
        return factor
    raise ValueError(f"load must be native, one of {', '.join(LOAD_LEVELS)}, or a factor like 250x; not {text!r}")


def parse_load(text: str, workload: Workload) -> tuple[str, LoadPlan]:
    """``native``, a level name (``low`` … ``extreme``) or a factor like ``250x``."""
    factor, text = load_factor(text), text.strip().lower()
    if text == "native":
        return "native", LoadPlan(1.0, 1, offered_peak(workload.nodes, workload.jobs))
    if factor is None:
        return text, plan_load(workload.nodes, workload.jobs, LOAD_LEVELS[text])
    return text, LoadPlan(factor, 1, offered_peak(workload.nodes, workload.scaled(factor)))


def load_shortfall(name: str, plan: LoadPlan) -> str | None:
    """A warning when a load level's target offered peak was not reached (a trace slice too small
    for it: :func:`~scheduling.simulator.plan_load` superposes a few replicas at most), else None."""
    target = LOAD_LEVELS.get(name)
    if target is None or plan.offered_peak >= 0.9 * target:
        return None
    return (f"load {name}: offered peak {plan.offered_peak:.0%}, short of the level's {target:.0%}: this trace "
            f"slice is too small to reach it ({plan.copies} superposed replica(s)); give it more jobs (--limit)")


def parse_heterogeneity(text: str) -> tuple[str, float]:
    """A level name (``none`` … ``extreme``) or a spread like ``0.25``."""
    text = text.strip().lower()
    if text in HETEROGENEITY_LEVELS:
        return text, HETEROGENEITY_LEVELS[text]
    try:
        spread = float(text)
    except ValueError:
        spread = math.nan
    if not 0 <= spread < 1:  # (nan, inf, out of range: a traceback from the simulator before)
        raise ValueError(f"heterogeneity must be one of {', '.join(HETEROGENEITY_LEVELS)} or a spread in "
                         f"[0, 1); not {text!r}")  # fmt: skip
    return f"±{spread:.0%}", spread


@dataclass
class Run:
    label: str  # what varies (policy, or policy @ sweep point)
    result: SimResult


def run_policies(nodes: Sequence, jobs: Sequence[SimJob], policies: Sequence[str], config: SimConfig,
                 console: Console, *, label: str = "") -> list[SimResult]:  # fmt: skip
    """One simulation per policy, each with a fresh duration predictor (or its ordering's own learning one), under one progress bar."""
    results: list[SimResult] = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        for name in policies:
            task = bar.add_task(f"{label}{name}", total=len(jobs))
            # a random placement draws from the run's seed, as everything random in a run does (SimConfig; found by
            # review: every `bench trace --seed` ran random with seed 0, and with equal speeds its rows were identical)
            random = name.rpartition("+")[2] == "random"
            policy = get_policy(name, **({"seed": config.seed} if random else {}))
            result = simulate(nodes, jobs, policy, config, estimator=estimator_for(policy),
                              progress=lambda done, total, t=task: bar.update(t, completed=done))  # fmt: skip
            bar.update(task, completed=len(jobs))
            bar.remove_task(task)
            results.append(result)
            console.print(f"  {label}{name}: {result.metrics.finished:,} finished, "
                          f"{len(result.steps):,} steps, {result.wall_s:.1f} s")  # fmt: skip
    return results
