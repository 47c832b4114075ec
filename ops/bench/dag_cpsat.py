"""An exact / anytime solver for the DAG scheduling problem of :mod:`scheduling.dag`, with
Google OR-Tools CP-SAT (analytic bounds: :mod:`ops.bench.dag_lower_bounds`).

The model is the one HEFT, CPOP and :class:`~scheduling.dag.ListSchedulingEnv` schedule in,
and the one :func:`scheduling.dag.check_schedule` checks: every task runs once, without
preemption, on one processor, for ``costs[task, proc]``; a processor runs one task at a time;
for an edge ``i → j``, ``start[j] >= finish[i] + c(proc[i], proc[j])`` with
``c(p, q) = latency[p, q] + data / bandwidth[p, q]`` and ``c(p, p) = 0``. Start times are
free (any idle gap, like HEFT's insertion), so every list schedule is a solution of it.

CP-SAT needs integers: every time is counted in units of ``1 / scale`` (``scale`` a power of
ten chosen so that HEFT's makespan is at least :data:`RESOLUTION` units: x1000 on the random
DAGs) and every cost is rounded **down**. Any real schedule, its times rounded down, is a
solution of the rounded problem, so the rounded problem's proven bound / ``scale`` is a
valid lower bound on the real optimum. A solution of the rounded problem is turned back into
a real schedule by replaying its processors, in its start order, through
:class:`~scheduling.dag.ListSchedulingEnv` (insertion on, HEFT's semantics): the result is
a valid real schedule, checked by :func:`scheduling.dag.check_schedule`, whose makespan is
the rounded one plus, usually, a few rounding units (:attr:`ExactResult.rounding_drift`; the replay can
also push a zero-cost task behind one it moved into slack: :mod:`scheduling.dag.local_search`).
That replay also shows the solution is reachable by a list scheduler over the env, i.e. by
the learned policy's action space.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from ops.bench.dag_lower_bounds import analytic_bounds, comm_heads_tails
from scheduling.dag import DagProblem, Schedule, assert_valid_schedule, replay

#: HEFT's makespan is at least this many integer time units after scaling
RESOLUTION = 1e5

_STATUS = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible", cp_model.INFEASIBLE: "infeasible",
           cp_model.MODEL_INVALID: "invalid", cp_model.UNKNOWN: "unknown"}  # fmt: skip


def time_scale(makespan: float) -> float:
    """The power of ten that puts ``makespan`` at >= :data:`RESOLUTION` integer units."""
    if makespan <= 0:
        return 1.0
    return float(10 ** max(0, math.ceil(math.log10(RESOLUTION / makespan))))


@dataclass(frozen=True)
class ExactResult:
    """One solver run. Times in the problem's units unless named ``*_units``."""

    schedule: Schedule  # the best valid real schedule found (never worse than the hint)
    makespan: float
    lower_bound: float  # proven by CP-SAT (rounded problem), valid for the real problem
    optimal: bool  # CP-SAT proved its solution of the rounded problem optimal
    status: str
    scale: float  # integer units per time unit
    objective_units: int  # CP-SAT's best makespan in units (-1: none)
    bound_units: int
    rounding_drift: float  # real makespan of the replayed solution - objective_units / scale
    hint_makespan: float
    seconds: float

    @property
    def gap(self) -> float:
        """makespan / lower bound - 1 (0 when proven optimal up to rounding)."""
        return self.makespan / self.lower_bound - 1 if self.lower_bound > 0 else float("nan")


def _comm_units(problem: DagProblem, scale: float) -> np.ndarray:
    """(edges, P, P) communication cost of each edge between each processor pair, in units."""
    plat, g = problem.platform, problem.graph
    comm = plat.startup[None] + g.data[:, None, None] * plat.inv_bandwidth[None]
    return np.floor(comm * scale + 1e-9).astype(np.int64)


def build_model(problem: DagProblem, scale: float, horizon: int) -> tuple[cp_model.CpModel, dict[str, object]]:
    """The CP-SAT model and its variables: ``x[i][p]`` (task on processor), ``start[i]``, ``makespan``."""
    g, n, procs = problem.graph, problem.n_tasks, problem.n_procs
    w = np.floor(problem.costs * scale + 1e-9).astype(np.int64)
    comm = _comm_units(problem, scale)
    m = cp_model.CpModel()
    # release dates and delivery times from the comm-path bound, on the rounded costs (exact there)
    remote = comm[:, ~np.eye(procs, dtype=bool)].min(axis=1) if procs > 1 else np.zeros(g.n_edges, np.int64)
    head, tail = comm_heads_tails(problem, w.min(axis=1), remote)
    head, tail = head.astype(np.int64), tail.astype(np.int64)
    start = [m.new_int_var(int(min(head[i], horizon)), horizon, f"s{i}") for i in range(n)]
    end = [m.new_int_var(0, horizon, f"e{i}") for i in range(n)]
    x = [[m.new_bool_var(f"x{i}_{p}") for p in range(procs)] for i in range(n)]
    per_proc: list[list[cp_model.IntervalVar]] = [[] for _ in range(procs)]
    task_iv = []
    for i in range(n):
        m.add_exactly_one(x[i])
        dur = m.new_int_var(int(w[i].min()), int(w[i].max()), f"d{i}")
        m.add(dur == sum(int(w[i, p]) * x[i][p] for p in range(procs)))
        task_iv.append(m.new_interval_var(start[i], dur, end[i], f"t{i}"))
        for p in range(procs):
            per_proc[p].append(m.new_optional_fixed_size_interval_var(start[i], int(w[i, p]), x[i][p], f"t{i}p{p}"))
    for p in range(procs):
        m.add_no_overlap(per_proc[p])
    # redundant: at most P tasks at once (energy reasoning on the makespan bound)
    m.add_cumulative(task_iv, [1] * n, procs)
    for k in range(g.n_edges):
        i, j = int(g.src[k]), int(g.dst[k])
        m.add(start[j] >= end[i])  # redundant, without communication
        for q in range(procs):
            # on q, j waits for i's end plus the transfer from wherever i runs
            arrive = sum(int(comm[k, p, q]) * x[i][p] for p in range(procs) if comm[k, p, q])
            if isinstance(arrive, int):
                continue  # free from every processor: the redundant constraint suffices
            m.add(start[j] >= end[i] + arrive).only_enforce_if(x[j][q])
    makespan = m.new_int_var(0, horizon, "makespan")
    m.add_max_equality(makespan, [end[i] for i in g.exits])
    for i in range(n):
        m.add(makespan >= end[i] + int(tail[i]))  # redundant: i's successors still need tail[i]
    m.minimize(makespan)
    return m, {"x": x, "start": start, "makespan": makespan, "w": w}


def solve_exact(problem: DagProblem, hint: Schedule, *, time_limit_s: float = 15.0, workers: int = 8,
                seed: int = 0) -> ExactResult:  # fmt: skip
    """Minimise the makespan with CP-SAT for ``time_limit_s`` seconds, warm-started with
    ``hint`` (a valid schedule, e.g. HEFT's); the best valid schedule, the proven bound and
    whether it is optimal. Deterministic for a fixed seed and worker count only up to the
    wall-clock time limit."""
    t0 = time.perf_counter()
    assert_valid_schedule(problem, hint)
    scale = time_scale(hint.makespan)
    horizon = int(math.floor(hint.makespan * scale + 1e-9)) + 1
    model, v = build_model(problem, scale, horizon)
    h_start = np.floor(np.asarray(hint.start) * scale + 1e-9).astype(np.int64)
    for i in range(problem.n_tasks):
        model.add_hint(v["start"][i], int(h_start[i]))
        for p in range(problem.n_procs):
            model.add_hint(v["x"][i][p], int(hint.proc[i] == p))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    status = solver.solve(model)
    best, objective, drift = hint, -1, 0.0
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        x = np.array([[solver.value(b) for b in row] for row in v["x"]], dtype=np.int64)
        starts = np.array([solver.value(s) for s in v["start"]], dtype=np.int64)
        objective = int(solver.objective_value)
        found = replay(problem, x.argmax(axis=1), starts)  # the real schedule of CP-SAT's choices
        assert_valid_schedule(problem, found)
        drift = found.makespan - objective / scale
        if found.makespan < best.makespan:
            best = found
    bound_units = int(math.floor(solver.best_objective_bound + 1e-9)) if status != cp_model.INFEASIBLE else 0
    # CP-SAT's bound can only be trusted when it found no contradiction; INFEASIBLE would mean a model bug
    if status in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        raise RuntimeError(f"CP-SAT says {_STATUS[status]} for {problem.name}: the model is wrong")
    lower = max(bound_units / scale, analytic_bounds(problem)["best"] if problem.n_tasks else 0.0)
    if lower > best.makespan * (1 + 1e-9):
        raise RuntimeError(f"lower bound {lower} above a valid makespan {best.makespan} for {problem.name}")
    return ExactResult(best, best.makespan, lower, status == cp_model.OPTIMAL,
                       _STATUS.get(status, str(status)), scale, objective, bound_units, drift,
                       hint.makespan, time.perf_counter() - t0)  # fmt: skip
