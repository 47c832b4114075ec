"""HEFT (Topcuoglu, Hariri and Wu, IEEE TPDS 2002): tasks by decreasing upward rank
(mean computation and communication costs), each on the processor that gives it the
earliest finish time, with insertion into idle gaps.

Taking at each step the ready task of highest rank is the paper's sorted list whenever
that list is a topological order (a task's upward rank exceeds its children's when costs
are positive); with zero-cost tasks, whose rank may tie a child's, it still never places a
child before its parent.
"""

from __future__ import annotations

import numpy as np

from scheduling.dag.env import ListSchedulingEnv
from scheduling.dag.problem import DagProblem
from scheduling.dag.ranks import best_index, heft_upward_ranks
from scheduling.dag.schedulers.base import ListScheduler
from scheduling.dag.schedulers.registry import register_dag_scheduler


@register_dag_scheduler("heft")
class Heft(ListScheduler):
    name = "heft"
    insertion = True

    def __init__(self) -> None:
        self.rank = np.zeros(0)

    def prepare(self, problem: DagProblem) -> None:
        self.rank = heft_upward_ranks(problem)

    def select_task(self, env: ListSchedulingEnv) -> int:
        return best_index(self.rank, env.ready)
