"""Analytic lower bounds on the makespan of a DAG problem (:mod:`scheduling.dag`'s model).

- **CP_MIN** (the SLR denominator, :func:`scheduling.metrics.dag.critical_path_min_length`):
  the longest path with every task at its minimum cost and free communication;
- **work**: ``Σ_i min_p W[i, p] / P``;
- **comm-path** (:func:`comm_path_bound`): CP_MIN that also charges communication. A task
  ``j`` starts after each parent ``i``'s data arrives: ``finish(i) + c_ij`` if ``i`` runs on
  another processor, or ``finish(i)`` if ``i`` runs on ``j``'s processor, but then all such
  co-located parents run one after the other on that one processor. So, with ``head(i)`` a
  lower bound on ``i``'s start::

      head(j) = min over sets S of parents on j's processor of
                max( max_{i ∉ S} head(i) + w_i + c_ij,  one-machine makespan of S )

  where the one-machine makespan of S (releases ``head(i)``, durations ``w_i``) is
  ``max_k r_(k) + Σ_{l >= k} w_(l)`` over S sorted by release. The best S is always a prefix
  of the parents sorted by ``head + w + c`` descending, so only those are tried. ``w`` are
  the minimum costs, ``c`` the minimum remote transfer cost of the edge. Each child chooses its
  own S (a parent is on one processor only in reality): a relaxation, hence a valid bound.
  ``tail(i)`` is the same on the reversed graph (a schedule run backwards in time is a
  schedule of the reversed DAG), and the bound is ``max_i head(i) + w_i + tail(i)``.

The heads and tails are also given to the CP-SAT model (:mod:`ops.bench.dag_cpsat`) as
release dates and delivery times. One Python loop over tasks (in topological order) and their
parents: the bound runs once per problem, off any hot path.
"""

from __future__ import annotations

import numpy as np

from scheduling.dag import DagProblem
from scheduling.metrics.dag import critical_path_min_length


def work_bound(problem: DagProblem) -> float:
    """``Σ_i min_p W[i, p] / P``: the processors cannot do the minimum total work faster."""
    return float(problem.costs.min(axis=1).sum() / problem.n_procs) if problem.n_tasks else 0.0


def min_remote_comm(problem: DagProblem) -> np.ndarray:
    """Per edge, the least it can cost between two different processors (0 with one processor)."""
    plat, g = problem.platform, problem.graph
    if problem.n_procs == 1:
        return np.zeros(g.n_edges)
    off = ~np.eye(problem.n_procs, dtype=bool)
    pair = plat.startup[off][None, :] + g.data[:, None] * plat.inv_bandwidth[off][None, :]
    return pair.min(axis=1)


def _one_machine(release: np.ndarray, dur: np.ndarray) -> float:
    """Least makespan of non-preemptive jobs on one machine with release dates (release order)."""
    order = np.argsort(release, kind="stable")
    r, w = release[order], dur[order]
    return float(np.max(r + np.cumsum(w[::-1])[::-1]))


def comm_heads(order: np.ndarray, parents: list[np.ndarray], edge_c: list[np.ndarray],
               w: np.ndarray) -> np.ndarray:  # fmt: skip
    """``head(j)`` (module docstring) for tasks visited in ``order`` (parents first);
    ``parents[j]`` and ``edge_c[j]`` are j's parents and the remote cost of each edge."""
    head = np.zeros(len(w))
    for j in order:
        par = parents[j]
        if len(par) == 0:
            continue
        remote = head[par] + w[par] + edge_c[j]
        by_remote = np.argsort(-remote, kind="stable")
        best = float(remote[by_remote[0]])  # S empty: every parent elsewhere
        for m in range(1, len(par) + 1):
            together = par[by_remote[:m]]
            rest = float(remote[by_remote[m]]) if m < len(par) else 0.0
            best = min(best, max(rest, _one_machine(head[together], w[together])))
        head[j] = best
    return head


def comm_heads_tails(problem: DagProblem, w: np.ndarray | None = None,
                     c: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(head, tail) per task; ``w`` (per task) and ``c`` (per edge) default to the minimum
    costs and :func:`min_remote_comm` (the CP-SAT model passes its rounded integer ones)."""
    g, n = problem.graph, problem.n_tasks
    w = problem.costs.min(axis=1) if w is None else np.asarray(w, dtype=np.float64)
    c = min_remote_comm(problem) if c is None else np.asarray(c, dtype=np.float64)
    ins = [g.in_edges(j) for j in range(n)]
    outs = [g.out_edges(j) for j in range(n)]
    head = comm_heads(g.topological_order(), [g.src[e] for e in ins], [c[e] for e in ins], w)
    backwards = np.lexsort((np.arange(n), g.height))
    tail = comm_heads(backwards, [g.dst[e] for e in outs], [c[e] for e in outs], w)
    return head, tail


def comm_path_bound(problem: DagProblem) -> float:
    """``max_i head(i) + w_i + tail(i)`` (module docstring); >= CP_MIN."""
    if problem.n_tasks == 0:
        return 0.0
    head, tail = comm_heads_tails(problem)
    return float((head + problem.costs.min(axis=1) + tail).max())


def analytic_bounds(problem: DagProblem) -> dict[str, float]:
    """Every analytic bound by name, and ``best`` = their maximum."""
    out = {"cp_min": critical_path_min_length(problem), "work": work_bound(problem),
           "comm_path": comm_path_bound(problem)}  # fmt: skip
    return out | {"best": max(out.values())}
