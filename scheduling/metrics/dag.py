"""Metrics of a DAG schedule on heterogeneous processors (Topcuoglu et al. 2002, §5.1).

- **makespan** = the latest finish time of any task (schedules start at time 0).
- **sequential time** = ``min_p Σ_i W[i, p]``: the whole DAG run on the single processor
  that is fastest for it, without communication.
- **speedup** = sequential time / makespan (> 1: the parallel schedule beats the best
  single processor).
- **CP_MIN** = the critical path of the DAG weighted, per task, by its minimum cost
  ``min_p W[i, p]`` and with no communication: the entry-to-exit path maximising
  ``Σ_{i ∈ path} min_p W[i, p]``. Its length is a lower bound on any makespan.
- **SLR** (schedule length ratio) = makespan / ``Σ_{i ∈ CP_MIN} min_p W[i, p]``; >= 1, and
  1 only when the schedule runs the critical path back to back on its fastest processors.

Speedup and SLR are NaN when their denominator is 0 (a DAG of zero-cost tasks).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from scheduling.dag.problem import DagProblem
from scheduling.dag.ranks import critical_path, upward_ranks
from scheduling.dag.schedule import Schedule


def makespan(schedule: Schedule) -> float:
    return schedule.makespan


def sequential_time(problem: DagProblem) -> float:
    """``min_p Σ_i W[i, p]``."""
    return float(problem.costs.sum(axis=0).min()) if problem.n_tasks else 0.0


def speedup(problem: DagProblem, schedule: Schedule) -> float:
    span = schedule.makespan
    return sequential_time(problem) / span if span > 0 else float("nan")


def critical_path_min(problem: DagProblem) -> list[int]:
    """The tasks of CP_MIN (see the module docstring), entry to exit."""
    return critical_path(problem.graph, problem.costs.min(axis=1), np.zeros(problem.graph.n_edges))


def critical_path_min_length(problem: DagProblem) -> float:
    """``Σ_{i ∈ CP_MIN} min_p W[i, p]``: the SLR denominator."""
    if problem.n_tasks == 0:
        return 0.0
    rank = upward_ranks(problem.graph, problem.costs.min(axis=1), np.zeros(problem.graph.n_edges))
    return float(rank.max())


def slr(problem: DagProblem, schedule: Schedule) -> float:
    bound = critical_path_min_length(problem)
    return schedule.makespan / bound if bound > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class DagMetrics:
    makespan: float
    speedup: float
    slr: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def dag_metrics(problem: DagProblem, schedule: Schedule) -> DagMetrics:
    return DagMetrics(schedule.makespan, speedup(problem, schedule), slr(problem, schedule))
