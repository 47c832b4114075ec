"""A rollout teacher that beats HEFT, for imitation.

At every step it tries the ``k`` ready tasks of highest upward rank on every processor,
completes each partial schedule with HEFT (highest rank first, earliest finish time,
insertion) and takes the action whose completion has the shortest makespan — HEFT's own
choice is among the candidates, and the best completion found so far is kept, so the
teacher is never worse than HEFT (a rollout policy in the sense of Bertsekas). It costs
``O(k · P · n²)`` environment steps per DAG (a few seconds for 100 tasks), which is why
the network imitates it instead of running it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from inference.dag.features import DagContext, dag_context, proc_features, task_view
from scheduling.dag import DagProblem, ListSchedulingEnv

_STATE = ("proc", "start", "finish", "scheduled", "missing_parents", "ready_since", "_busy_start",
          "_busy_finish", "_busy_count", "proc_available")  # fmt: skip


def clone_env(env: ListSchedulingEnv) -> ListSchedulingEnv:
    """An independent copy of ``env``'s state (the problem is shared, it is immutable)."""
    twin = copy.copy(env)
    for name in _STATE:
        setattr(twin, name, getattr(env, name).copy())
    return twin


def heft_complete(env: ListSchedulingEnv, rank: np.ndarray) -> float:
    """Finish ``env`` in place with HEFT's rule; the resulting makespan."""
    while not env.done:
        ready = env.ready
        task = int(ready[np.argmax(rank[ready])])
        env.step(task, int(np.argmin(env.finish_times(task))))
    return env.makespan


@dataclass(frozen=True)
class Sample:
    """One teacher decision: stage-one rows and the chosen row, stage-two rows and the chosen processor."""

    x_task: np.ndarray  # (R, TASK_DIM)
    task: int
    x_proc: np.ndarray  # (P, PROC_DIM)
    proc: int


def teacher_action(ctx: DagContext, env: ListSchedulingEnv, k: int, best: float) -> tuple[int, int, float]:
    """The (task, processor) whose HEFT completion is shortest, and that makespan; ``best`` is
    the makespan the current trajectory is already known to reach (kept on ties)."""
    ready = env.ready
    cands = ready[np.argsort(-ctx.rank_u[ready], kind="stable")[:k]]
    choice: tuple[int, int, float] | None = None
    for task in cands:
        for proc in range(ctx.problem.n_procs):
            twin = clone_env(env)
            twin.step(int(task), proc)
            span = heft_complete(twin, ctx.rank_u)
            if choice is None or span < choice[2] - 1e-9 * ctx.scale:
                choice = (int(task), proc, span)
    assert choice is not None
    if choice[2] > best + 1e-9 * ctx.scale:  # never drift away from a known better completion
        heft_task = int(cands[0])
        return heft_task, int(np.argmin(env.finish_times(heft_task))), best
    return choice


def teacher_trajectory(problem: DagProblem, k: int = 3) -> tuple[list[Sample], float]:
    """Run the teacher on ``problem``: its decisions as samples, and its makespan."""
    ctx = dag_context(problem)
    env = ListSchedulingEnv(problem, insertion=True)
    best = heft_complete(clone_env(env), ctx.rank_u)
    samples = []
    while not env.done:
        view = task_view(ctx, env)
        task, proc, best = teacher_action(ctx, env, k, best)
        row = int(np.flatnonzero(view.ready == task)[0])
        samples.append(Sample(view.x, row, proc_features(ctx, env, view, row), proc))
        env.step(task, proc)
    return samples, env.makespan
