"""``heft-rollout``: a rollout over HEFT with no learned part (:mod:`scheduling.dag.rollout`).

HEFT's task tried on every processor at every step, each try finished with HEFT, the shortest
taken, then the critical-path local search. The baseline for the learned rollouts
(``learned-rollout``, ``learned-rollout-wide``), which add the policy's proposals to these
candidates: what they gain beyond it is the network's.
"""

from __future__ import annotations

from scheduling.dag.problem import DagProblem
from scheduling.dag.rollout import rollout_schedule
from scheduling.dag.schedule import Schedule
from scheduling.dag.schedulers.registry import register_dag_scheduler


@register_dag_scheduler("heft-rollout")
class HeftRollout:
    name = "heft-rollout"

    def schedule(self, problem: DagProblem) -> Schedule:
        return rollout_schedule(problem)
