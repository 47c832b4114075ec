"""Decision-time search with the learned DAG policy as the prior: ``learned-rollout``.

At every step the candidates are HEFT's own task (highest upward rank) on every processor,
plus the policy's ``tasks`` most likely ready tasks on, each, its ``procs`` most likely
processors; every candidate (task, processor) is tried on a copy of the environment and the
DAG is finished with HEFT (highest upward rank first, earliest finish time, insertion); the
step takes the candidate whose completion is shortest (ties: HEFT's action). This is one step
of policy iteration over HEFT (a rollout algorithm, Bertsekas): HEFT's own action is always a
candidate, so each step's completion is never longer than the previous one's; the learned
policy adds the candidates HEFT would not look at.

Measured on 10 training DAGs: the policy's proposals *alone* (without HEFT's task) lose the
rollout's guarantee and did worse (0.966 × HEFT with v003's top task, against 0.942 for
HEFT's task on every processor).

The best complete schedule seen is kept, and the initial HEFT completion is one of them, so
the result is never worse than HEFT. It costs ``tasks × procs`` HEFT completions per step,
``O(n² · tasks · procs)`` environment steps per DAG — about 1–3 s for 100 tasks on 4
processors here, against milliseconds for the greedy ``learned``. Reported separately.

Measured on the 100 held-out DAGs of seed 1 (2026-12-05, docs/learned-scheduler-measurements.md): the
search with no network (``heft-rollout``) −5.8 % SLR against HEFT; ``learned-rollout`` the very same
schedules (the trained policy's greedy choice is HEFT's); ``learned-rollout-wide`` −5.9 %. The network
adds 0.1 point to the search.

Then the critical-path local search (:func:`scheduling.dag.local_search.improve`: a task of the
critical path on another processor, or earlier in the order) polishes the result: on the 100
held-out DAGs of ``semsched bench dag`` it took ``learned-rollout``'s mean makespan from 225.1 to
222.9 and ``learned-rollout-wide``'s from 222.6 to 220.7 (HEFT: 235.0), for ~0.6–0.7 s more a DAG.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from inference.dag.features import dag_context, proc_features, task_view
from inference.dag.policy import LearnedDagScheduler
from scheduling.dag import DagProblem, ListSchedulingEnv, Schedule
from scheduling.dag.rollout import rollout_schedule as core_rollout
from scheduling.dag.schedulers import register_dag_scheduler


def rollout_schedule(problem: DagProblem, net: torch.nn.Module | None, *, tasks: int = 1,
                     procs: int = 2, polish: bool = True) -> Schedule:  # fmt: skip
    """The rollout search of :mod:`scheduling.dag.rollout` with the policy's proposals besides
    HEFT's (``net=None`` or ``tasks=0``: only HEFT's task on every processor, ``heft-rollout``;
    ``polish=False``: without the local search after it)."""
    if net is None or tasks == 0:
        return core_rollout(problem, polish=polish)
    ctx = dag_context(problem)
    return core_rollout(problem, lambda env, rank: _proposals(ctx, net, env, tasks, procs), polish=polish)


def _proposals(ctx, net, env: ListSchedulingEnv, tasks: int, procs: int) -> list[tuple[int, int]]:  # noqa: ANN001
    """The policy's ``tasks`` likeliest ready tasks, each on its ``procs`` likeliest processors
    (the rollout adds them after HEFT's candidates, without repeats)."""
    view = task_view(ctx, env)
    out: list[tuple[int, int]] = []
    with torch.no_grad():
        logits, emb = net.task_logits(torch.from_numpy(view.x).unsqueeze(0),
                                      torch.ones(1, len(view.ready), dtype=torch.bool))  # fmt: skip
        rows = torch.argsort(logits[0], descending=True, stable=True)[:tasks].tolist()
        for row in rows:
            x = proc_features(ctx, env, view, row)[:, : net.config.proc_dim]
            x = torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(0)
            pl = net.proc_logits(x, emb[0, row].unsqueeze(0), torch.ones(1, x.shape[1], dtype=torch.bool))
            order = torch.argsort(pl[0], descending=True, stable=True)[:procs].tolist()
            out += [(int(view.ready[row]), int(p)) for p in order]
    return out


@register_dag_scheduler("learned-rollout")
class LearnedRolloutDagScheduler(LearnedDagScheduler):
    """``rollout_schedule`` with the trained policy as the prior (HEFT's proposals when there
    is no model: then it is a plain HEFT rollout, and ``fallback`` says so)."""

    name = "learned-rollout"

    def __init__(self, model_dir: Path | str | None = None, *, tasks: int = 1, procs: int = 2,
                 strict: bool = False) -> None:  # fmt: skip
        super().__init__(model_dir, strict=strict)
        self.tasks, self.procs = tasks, procs

    def schedule(self, problem: DagProblem) -> Schedule:
        return rollout_schedule(problem, self.net, tasks=self.tasks, procs=self.procs)


@register_dag_scheduler("learned-rollout-wide")
class WideLearnedRolloutDagScheduler(LearnedRolloutDagScheduler):
    """``learned-rollout`` with more of the policy's proposals: its 2 most likely ready tasks, each on
    its 4 most likely processors (besides HEFT's task on every processor). Measured on 30 held-out
    DAGs, before the local search polished both and while the policy's proposals replaced HEFT's
    candidates (fixed 2026-12-03): 0.9434 of HEFT's makespan against 0.9528 for ``learned-rollout``, at about 3.4× the time;
    HEFT's own 3 best-ranked tasks on every processor instead reached 0.9452 at 4×; the policy's 3 or 4
    tasks on 4 processors each, 0.9442 and 0.9423, at 1.5× and 2× this one's time."""

    name = "learned-rollout-wide"

    def __init__(self, model_dir: Path | str | None = None, *, tasks: int = 2, procs: int = 4,
                 strict: bool = False) -> None:  # fmt: skip
        super().__init__(model_dir, tasks=tasks, procs=procs, strict=strict)
