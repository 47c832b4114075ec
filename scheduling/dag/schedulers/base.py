"""The common interface of DAG schedulers, and the two-stage list policy they run on.

A :class:`DagScheduler` turns a :class:`~scheduling.dag.problem.DagProblem` into a
:class:`~scheduling.dag.schedule.Schedule`. Every scheduler here is a
:class:`ListScheduler`: a two-stage policy over :class:`~scheduling.dag.env.ListSchedulingEnv`
— pick a ready task, then a processor — which is exactly the action of the learned DAG
policy (issue 4). A learned policy implements :class:`TwoStagePolicy` and runs through
:func:`run_policy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np

from scheduling.dag.env import ListSchedulingEnv
from scheduling.dag.problem import DagProblem
from scheduling.dag.ranks import best_index
from scheduling.dag.schedule import Schedule


@runtime_checkable
class DagScheduler(Protocol):
    name: str

    def schedule(self, problem: DagProblem) -> Schedule: ...


class TwoStagePolicy(Protocol):
    """Stage one picks a ready task, stage two a processor for it."""

    def select_task(self, env: ListSchedulingEnv) -> int: ...

    def select_processor(self, env: ListSchedulingEnv, task: int) -> int: ...


def run_policy(env: ListSchedulingEnv, policy: TwoStagePolicy) -> Schedule:
    """Step ``env`` with ``policy`` until every task is placed."""
    while not env.done:
        task = policy.select_task(env)
        env.step(task, policy.select_processor(env, task))
    return env.schedule()


def earliest_finish_processor(env: ListSchedulingEnv, task: int) -> int:
    """The processor where ``task`` finishes earliest (ties: lowest index)."""
    eft = env.finish_times(task)
    return best_index(eft, np.arange(len(eft)), largest=False)


class ListScheduler(ABC):
    """A scheduler that is a two-stage policy: :meth:`prepare` once per problem (ranks …),
    then :meth:`select_task` / :meth:`select_processor` per step."""

    name: str = ""
    #: whether a task may go into an idle gap between tasks already placed on a processor
    insertion: bool = True

    def prepare(self, problem: DagProblem) -> None:  # noqa: B027 - optional hook
        """Per-problem precomputation (ranks, critical path); nothing by default."""

    @abstractmethod
    def select_task(self, env: ListSchedulingEnv) -> int: ...

    def select_processor(self, env: ListSchedulingEnv, task: int) -> int:
        return earliest_finish_processor(env, task)

    def schedule(self, problem: DagProblem) -> Schedule:
        self.prepare(problem)
        return run_policy(ListSchedulingEnv(problem, insertion=self.insertion), self)
