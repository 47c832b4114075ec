"""CPOP (Topcuoglu, Hariri and Wu, IEEE TPDS 2002): priority = upward + downward rank
(mean costs); the tasks whose priority equals the entry task's form the critical path,
and they all go to the critical-path processor (the one minimising the path's summed
computation cost). Ready tasks are taken by highest priority; a task off the critical path
goes to the processor giving the earliest finish time, with insertion.

With several entry tasks the path starts at the entry of highest priority; at each step it
follows the successor of highest priority (the paper's "priority == |CP|"; near-ties go to
the lowest index).
"""

from __future__ import annotations

import numpy as np

from scheduling.dag.env import ListSchedulingEnv
from scheduling.dag.problem import DagProblem
from scheduling.dag.ranks import best_index, cpop_priorities
from scheduling.dag.schedulers.base import ListScheduler, earliest_finish_processor
from scheduling.dag.schedulers.registry import register_dag_scheduler


def cpop_critical_path(problem: DagProblem, priority: np.ndarray) -> list[int]:
    g = problem.graph
    if g.n_tasks == 0:
        return []
    path = [best_index(priority, g.entries)]
    while len(out := g.out_edges(path[-1])):
        path.append(best_index(priority, g.dst[out]))
    return path


@register_dag_scheduler("cpop")
class Cpop(ListScheduler):
    name = "cpop"
    insertion = True

    def __init__(self) -> None:
        self.priority = np.zeros(0)
        self.on_path = np.zeros(0, dtype=bool)
        self.path_proc = 0

    def prepare(self, problem: DagProblem) -> None:
        self.priority = cpop_priorities(problem)
        path = cpop_critical_path(problem, self.priority)
        self.on_path = np.zeros(problem.n_tasks, dtype=bool)
        self.on_path[path] = True
        per_proc = problem.costs[path].sum(axis=0)
        self.path_proc = best_index(per_proc, np.arange(problem.n_procs), largest=False)

    def select_task(self, env: ListSchedulingEnv) -> int:
        return best_index(self.priority, env.ready)

    def select_processor(self, env: ListSchedulingEnv, task: int) -> int:
        return self.path_proc if self.on_path[task] else earliest_finish_processor(env, task)
