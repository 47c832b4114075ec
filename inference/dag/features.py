"""Features of a :class:`~scheduling.dag.env.ListSchedulingEnv` state for the two-stage
learned DAG policy (issue 4, point 7): one row per ready task (stage one) and one row per
processor for the chosen task (stage two).

Everything is normalised per DAG so that one model serves DAGs of 10 or 1,000 tasks and
any time unit: times are divided by ``T`` = the largest HEFT upward rank (the mean-cost
critical path length), costs by the DAG's mean task cost, counts by their maximum in the
DAG. Earliest start/finish times come from the environment itself
(``env.start_times`` / ``env.finish_times``), so they follow its insertion rule exactly.

Pure numpy (the model turns the arrays into tensors); vectorised over tasks and
processors — the only loop is over the ready tasks, one ``env.start_times`` call each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduling.dag import DagProblem, ListSchedulingEnv
from scheduling.dag.ranks import downward_ranks, upward_ranks

#: per-task features that do not change while the DAG is scheduled
STATIC_FEATURES = ("rank_u", "rank_d", "rank_sum", "mean_cost", "min_cost", "cost_cv", "out_degree",
                   "in_degree", "out_comm", "in_comm", "level", "height")  # fmt: skip
#: stage one: static features plus these, per ready task
TASK_DYNAMIC = ("rank_u_rel_ready", "is_top_rank", "eft_min_vs_makespan", "eft_min_vs_best_ready",
                "est_min_vs_now", "eft_gap_second", "waited", "unlocks", "n_ready", "progress")  # fmt: skip
#: stage two: per processor, for the chosen task
PROC_FEATURES = ("eft_vs_min", "eft_vs_makespan", "est_vs_ready", "cost_rel", "avail_vs_makespan",
                 "speed", "is_min_eft", "eft_order", "idle_before", "data_wait",
                 # locality (feature set 2; a model trained on set 1 reads only the first 10 columns)
                 "parent_comm_here", "child_pull_here", "speed_x_rank", "is_fastest",
                 # lookahead (feature set 3): PEFT's optimistic cost table, and the children's
                 # best optimistic finish given this placement (see :func:`child_lookahead`)
                 "oct_rel", "peft_rel", "look_rel", "look_vs_makespan", "look_minus_eft")  # fmt: skip
TASK_DIM = len(STATIC_FEATURES) + len(TASK_DYNAMIC)
PROC_DIM = len(PROC_FEATURES)


@dataclass(frozen=True)
class DagContext:
    """Per-problem precomputation: ranks, the time scale and the static feature matrix."""

    problem: DagProblem
    rank_u: np.ndarray  # (n,) HEFT upward rank (mean costs)
    scale: float  # T: the time unit of every time feature
    static: np.ndarray  # (n, len(STATIC_FEATURES)) float32
    speed: np.ndarray  # (P,) mean over tasks of w̄_i / W[i, p], centred on 1
    edge_comm: np.ndarray  # (E,) mean communication cost of each edge (c̄)
    oct: np.ndarray  # (n, P) PEFT's optimistic cost table


def dag_context(problem: DagProblem) -> DagContext:
    g = problem.graph
    w, c = problem.mean_costs(), problem.mean_comm_costs()
    rank_u = upward_ranks(g, w, c)
    rank_d = downward_ranks(g, w, c)
    scale = max(float(rank_u.max(initial=0.0)), 1e-12)
    w_mean = max(float(w.mean()) if len(w) else 0.0, 1e-12)
    out_comm = np.bincount(g.src, weights=c, minlength=g.n_tasks)
    in_comm = np.bincount(g.dst, weights=c, minlength=g.n_tasks)
    safe_w = np.maximum(w, 1e-12)
    static = np.stack([
        rank_u / scale, rank_d / scale, (rank_u + rank_d) / scale,
        w / w_mean, problem.costs.min(axis=1) / w_mean, problem.costs.std(axis=1) / safe_w,
        g.out_degree / max(1, int(g.out_degree.max(initial=0))),
        g.in_degree / max(1, int(g.in_degree.max(initial=0))),
        out_comm / w_mean / np.maximum(g.out_degree, 1), in_comm / w_mean / np.maximum(g.in_degree, 1),
        g.level / max(1, int(g.level.max(initial=0))), g.height / max(1, int(g.height.max(initial=0))),
    ], axis=1)  # fmt: skip
    ratio = safe_w[:, None] / np.maximum(problem.costs, 1e-12)
    speed = ratio.mean(axis=0)
    speed = speed / max(float(speed.mean()), 1e-12)
    return DagContext(problem, rank_u, scale, _clean(static), speed, c, optimistic_cost_table(problem))


def optimistic_cost_table(problem: DagProblem) -> np.ndarray:
    """PEFT's OCT (Arabnejad and Barbosa 2014): ``OCT[t, q]`` = the longest optimistic time
    from ``t``'s finish on ``q`` to the end of the DAG, each successor on its best processor::

        OCT(t, q) = max_{c ∈ succ(t)} min_{q'} (OCT(c, q') + W[c, q'] + c̄_tc · [q' ≠ q])

    Computed a hop height at a time, vectorised over the edges of that height."""
    g, w = problem.graph, problem.costs
    cbar = problem.mean_comm_costs()
    table = np.zeros((g.n_tasks, problem.n_procs))
    for h in range(1, int(g.height.max(initial=0)) + 1):
        edges = np.flatnonzero(g.height[g.src] == h)
        base = table[g.dst[edges]] + w[g.dst[edges]]  # (E_h, P)
        via = np.minimum(base, base.min(axis=1, keepdims=True) + cbar[edges, None])
        tail = np.zeros_like(table)
        np.maximum.at(tail, g.src[edges], via)
        rows = g.height == h
        table[rows] = tail[rows]
    return table


def child_lookahead(ctx: DagContext, env: ListSchedulingEnv, task: int, eft: np.ndarray) -> np.ndarray:
    """(P,) for ``task`` placed on each processor ``q`` (finishing at ``eft[q]``): the largest,
    over its children, of the child's best optimistic completion ``min_q' (start + W[c, q'] +
    OCT[c, q'])``, where the start waits for ``task``'s data from ``q``, the data of the
    child's other already placed parents, and ``q'`` to be free (append, no insertion).
    ``eft`` itself for a task without children. One (children, P, P) array, no loop."""
    p = ctx.problem
    g, n_procs = p.graph, p.n_procs
    out = g.out_edges(task)
    if len(out) == 0:
        return eft.copy()
    kids = g.dst[out]
    procs = np.arange(n_procs)
    own = eft[None, :, None] + p.platform.comm_cost(g.data[out][:, None, None], procs[None, :, None],
                                                      procs[None, None, :])  # (k, q, q')  # fmt: skip
    other = np.zeros((len(kids), n_procs))
    for j, c in enumerate(kids):  # the children's other placed parents (few per child)
        into = g.in_edges(int(c))
        into = into[env.scheduled[g.src[into]] & (g.src[into] != task)]
        if len(into):
            arrive = env.finish[g.src[into]][:, None] + p.platform.comm_cost(
                g.data[into][:, None], env.proc[g.src[into]][:, None], procs[None, :])
            other[j] = arrive.max(axis=0)
    free = np.broadcast_to(env.proc_available[None, :], (n_procs, n_procs)).copy()
    free[procs, procs] = np.maximum(free[procs, procs], eft)  # q' = q waits for ``task`` itself
    start = np.maximum(np.maximum(own, other[:, None, :]), free[None, :, :])
    finish = start + (p.costs[kids] + ctx.oct[kids])[:, None, :]
    return finish.min(axis=2).max(axis=0)


@dataclass(frozen=True)
class TaskView:
    """Stage one's input: the ready tasks, their feature rows, and their EST/EFT per processor
    (kept so that stage two does not recompute them)."""

    ready: np.ndarray  # (R,) task indices
    x: np.ndarray  # (R, TASK_DIM) float32
    est: np.ndarray  # (R, P)
    eft: np.ndarray  # (R, P)
    data_ready: np.ndarray  # (R, P)


def task_view(ctx: DagContext, env: ListSchedulingEnv) -> TaskView:
    p = ctx.problem
    ready = env.ready
    data_ready = np.stack([env.data_ready_times(int(t)) for t in ready])
    est = np.stack([env.start_times(int(t)) for t in ready])
    eft = est + p.costs[ready]
    T, n = ctx.scale, p.n_tasks
    makespan = env.makespan
    now = float(env.proc_available.min())
    ru = ctx.rank_u[ready]
    eft_min = eft.min(axis=1)
    eft_sorted = np.sort(eft, axis=1)
    second = eft_sorted[:, 1] if eft.shape[1] > 1 else eft_sorted[:, 0]
    g = p.graph
    unlocks = np.array([np.sum(env.missing_parents[g.dst[g.out_edges(int(t))]] == 1) for t in ready])
    dyn = np.stack([
        ru / max(float(ru.max()), 1e-12), (ru >= ru.max() - 1e-9 * T).astype(float),
        (eft_min - makespan) / T, (eft_min - eft_min.min()) / T, (est.min(axis=1) - now) / T,
        (second - eft_min) / T, (env.steps - env.ready_since[ready]) / n,
        unlocks / max(1, int(g.out_degree.max(initial=0))),
        np.full(len(ready), len(ready) / p.n_procs), np.full(len(ready), env.steps / n),
    ], axis=1)  # fmt: skip
    x = np.concatenate([ctx.static[ready], dyn], axis=1)
    return TaskView(ready, _clean(x), est, eft, data_ready)


def proc_features(ctx: DagContext, env: ListSchedulingEnv, view: TaskView, row: int) -> np.ndarray:
    """(P, PROC_DIM) features of placing ``view.ready[row]`` on each processor."""
    p = ctx.problem
    task = int(view.ready[row])
    T = ctx.scale
    est, eft, ready_t = view.est[row], view.eft[row], view.data_ready[row]
    makespan = env.makespan
    cost = p.costs[task]
    order = np.argsort(np.argsort(eft, kind="stable"), kind="stable")
    g, n_procs = p.graph, p.n_procs
    into = g.in_edges(task)
    here = np.bincount(env.proc[g.src[into]], weights=ctx.edge_comm[into], minlength=n_procs)
    kids = g.dst[g.out_edges(task)]
    co = np.concatenate([g.in_edges(int(c)) for c in kids]) if len(kids) else np.zeros(0, dtype=np.int64)
    co = co[(g.src[co] != task) & env.scheduled[g.src[co]]]
    pull = np.bincount(env.proc[g.src[co]], weights=ctx.edge_comm[co], minlength=n_procs)
    oct_t = ctx.oct[task]
    peft = eft + oct_t
    look = child_lookahead(ctx, env, task, eft)
    x = np.stack([
        (eft - eft.min()) / T, (eft - makespan) / T, (est - ready_t) / T,
        cost / max(float(cost.mean()), 1e-12), (env.proc_available - makespan) / T, ctx.speed,
        (order == 0).astype(float), order / max(1, p.n_procs - 1),
        (est - env.proc_available) / T, (ready_t - ready_t.min()) / T,
        here / max(float(here.sum()), 1e-12), pull / max(float(pull.sum()), 1e-12),
        ctx.speed * ctx.rank_u[task] / T, (cost <= cost.min()).astype(float),
        (oct_t - oct_t.min()) / T, (peft - peft.min()) / T, (look - look.min()) / T, (look - makespan) / T,
        (look - eft) / T,
    ], axis=1)  # fmt: skip
    return _clean(x)


def _clean(x: np.ndarray) -> np.ndarray:
    """float32, no NaN/inf, clipped to a range a small network handles."""
    return np.clip(np.nan_to_num(x, nan=0.0, posinf=10.0, neginf=-10.0), -10.0, 10.0).astype(np.float32)
