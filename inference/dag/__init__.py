"""Learned DAG scheduling (issue 4, point 7): a two-stage policy (pick a ready task, then a
processor) on :class:`scheduling.dag.ListSchedulingEnv`, imitation of a rollout teacher
that beats HEFT, then REINFORCE. Importing this package registers the DAG schedulers
``learned``, ``learned-sample``, ``learned-rollout`` and ``learned-rollout-wide`` (see :mod:`inference.dag.policy` for where they load the
model from, and their HEFT fallback)."""

from inference.dag.policy import LearnedDagScheduler, LearnedSampleDagScheduler, NetPolicy, schedule_with
from inference.dag.search import LearnedRolloutDagScheduler, WideLearnedRolloutDagScheduler, rollout_schedule

__all__ = ["LearnedDagScheduler", "LearnedRolloutDagScheduler", "LearnedSampleDagScheduler", "NetPolicy",
           "WideLearnedRolloutDagScheduler", "rollout_schedule", "schedule_with"]
