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

from dataclasses import dataclass

import numpy as np

from inference.dag.features import DagContext, dag_context, proc_features, task_view
from scheduling.dag import DagProblem, ListSchedulingEnv
from scheduling.dag.rollout import heft_candidates, heft_complete


@dataclass(frozen=True)
class Sample:
    """One teacher decision: stage-one rows and the chosen row, stage-two rows and the chosen
    processor, and which rows / processors are as good as the choice (equal best completion)."""

    x_task: np.ndarray  # (R, TASK_DIM)
    task: int
    x_proc: np.ndarray  # (P, PROC_DIM)
    proc: int
    task_good: np.ndarray | None = None  # (R,) bool: rows whose best completion ties the best
    proc_good: np.ndarray | None = None  # (P,) bool: processors (for ``task``) that tie the best


@dataclass(frozen=True)
class TeacherChoice:
    task: int
    proc: int
    makespan: float
    spans: np.ndarray  # (k', P) HEFT-completion makespan of each tried (task, processor)
    tasks: np.ndarray  # (k',) the tried tasks, HEFT's first


def teacher_action(ctx: DagContext, env: ListSchedulingEnv, k: int, best: float) -> TeacherChoice:
    """The (task, processor) whose HEFT completion is shortest. Ties go to HEFT's own action
    (the top-rank task on its earliest-finish processor), then to higher rank and earlier
    finish, so the teacher deviates from HEFT only for a strictly shorter completion. ``best``
    is the makespan the current trajectory is already known to reach."""
    ready = env.ready
    heft_own = heft_candidates(env, ctx.rank_u)  # HEFT's task on every processor, its action first (review:
    heft_task, heft_proc = heft_own[0]  # near-ties broken as heft_complete breaks them, not by argmax / argmin)
    others = ready[np.argsort(-ctx.rank_u[ready], kind="stable")]
    cands = np.concatenate([[heft_task], others[others != heft_task]])[:k]
    tol = 1e-9 * ctx.scale
    spans = np.full((len(cands), ctx.problem.n_procs), np.inf)
    choice: tuple[int, int, float] | None = None
    for i, task in enumerate(cands):
        order = [p for _, p in heft_own] if task == heft_task else np.argsort(env.finish_times(int(task)), kind="stable")
        for proc in order:
            twin = env.clone()
            twin.step(int(task), int(proc))
            spans[i, proc] = heft_complete(twin, ctx.rank_u)
            if choice is None or spans[i, proc] < choice[2] - tol:
                choice = (int(task), int(proc), float(spans[i, proc]))
    assert choice is not None
    if choice[2] > best + tol:  # never drift away from a known better completion
        return TeacherChoice(heft_task, heft_proc, best, spans, cands)
    return TeacherChoice(*choice, spans, cands)


def make_sample(ctx: DagContext, env: ListSchedulingEnv, choice: TeacherChoice) -> Sample:
    """The training sample of ``choice`` at ``env``'s state (before the step)."""
    view = task_view(ctx, env)
    row = int(np.flatnonzero(view.ready == choice.task)[0])
    tol = 1e-9 * ctx.scale
    task_good = np.zeros(len(view.ready), dtype=bool)
    good_rows = np.searchsorted(view.ready, choice.tasks[choice.spans.min(axis=1) <= choice.makespan + tol])
    task_good[good_rows] = True
    task_good[row] = True
    i = int(np.flatnonzero(choice.tasks == choice.task)[0])
    proc_good = choice.spans[i] <= choice.makespan + tol
    proc_good[choice.proc] = True
    return Sample(view.x, row, proc_features(ctx, env, view, row), choice.proc, task_good, proc_good)


def teacher_trajectory(problem: DagProblem, k: int = 3) -> tuple[list[Sample], float]:
    """Run the teacher on ``problem``: its decisions as samples, and its makespan."""
    ctx = dag_context(problem)
    env = ListSchedulingEnv(problem, insertion=True)
    best = heft_complete(env.clone(), ctx.rank_u)
    samples = []
    while not env.done:
        choice = teacher_action(ctx, env, k, best)
        samples.append(make_sample(ctx, env, choice))
        best = choice.makespan
        env.step(choice.task, choice.proc)
    return samples, env.makespan
