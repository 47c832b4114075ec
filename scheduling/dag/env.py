"""A step-wise list-scheduling environment for DAGs.

State: the ready tasks (every parent placed), each processor's busy intervals, and the
partial schedule. Action: ``(ready task, processor)``: the task is placed on the processor
at its earliest feasible start. That is where every list scheduler here runs (HEFT, CPOP,
FIFO) and where a learned two-stage policy (pick a ready task, then a processor) plugs in.

Earliest start of task ``t`` on processor ``p``: not before its data is ready there,
``ready(t, p) = max over parents i of finish[i] + c(proc[i], p)`` (0 for entry tasks), and

- with ``insertion=True`` (HEFT, CPOP): in the first idle gap of ``p`` after ``ready(t, p)``
  that is long enough for ``costs[t, p]`` (possibly between two placed tasks);
- with ``insertion=False`` (FIFO): after the last task placed on ``p``.

Both are computed for all processors at once on padded ``(P, n)`` interval arrays.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from scheduling.dag.problem import DagProblem
from scheduling.dag.schedule import Schedule


class IllegalActionError(ValueError):
    """The task is not ready, or the processor does not exist."""


@dataclass(frozen=True, slots=True)
class Placement:
    """What one step did: the task, its processor and times, and the makespan before/after
    (``makespan_before - makespan_after`` is a natural per-step reward)."""

    task: int
    proc: int
    start: float
    finish: float
    makespan_before: float
    makespan_after: float


class ListSchedulingEnv:
    def __init__(self, problem: DagProblem, *, insertion: bool = True) -> None:
        self.problem = problem
        self.insertion = insertion
        self.reset()

    def reset(self) -> None:
        n, p = self.problem.n_tasks, self.problem.n_procs
        self.proc = np.full(n, -1, dtype=np.int64)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.scheduled = np.zeros(n, dtype=bool)
        self.missing_parents = self.problem.graph.in_degree.astype(np.int64)
        #: the step at which each task became ready (-1: not yet); entry tasks at step 0
        self.ready_since = np.where(self.missing_parents == 0, 0, -1).astype(np.int64)
        self.steps = 0
        # busy intervals per processor, sorted by start, padded with +inf
        self._busy_start = np.full((p, n + 1), np.inf)
        self._busy_finish = np.full((p, n + 1), np.inf)
        self._busy_count = np.zeros(p, dtype=np.int64)
        #: the end of the last task on each processor (0 when idle so far)
        self.proc_available = np.zeros(p)

    def clone(self) -> ListSchedulingEnv:
        """An independent copy of this env's state: every array copied (the problem is shared: it is
        immutable; a state array added later is copied too)."""
        twin = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(twin, name, value.copy())
        return twin

    # -- state ------------------------------------------------------------------------------
    @property
    def ready(self) -> np.ndarray:
        """Tasks not yet placed whose parents are all placed, by index."""
        return np.flatnonzero((self.missing_parents == 0) & ~self.scheduled)

    @property
    def done(self) -> bool:
        return bool(self.scheduled.all())

    @property
    def makespan(self) -> float:
        return float(np.nanmax(self.finish)) if self.scheduled.any() else 0.0

    def data_ready_times(self, task: int) -> np.ndarray:
        """(P,) when all of ``task``'s inputs can be on each processor."""
        g = self.problem.graph
        edges = g.in_edges(task)
        if len(edges) == 0:
            return np.zeros(self.problem.n_procs)
        src = g.src[edges]
        if not self.scheduled[src].all():
            raise IllegalActionError(f"task {g.names[task]!r} is not ready: a parent is not placed")
        procs = np.arange(self.problem.n_procs)
        arrive = self.finish[src][:, None] + self.problem.platform.comm_cost(
            g.data[edges][:, None], self.proc[src][:, None], procs[None, :])
        return arrive.max(axis=0)

    def start_times(self, task: int) -> np.ndarray:
        """(P,) the earliest start of ``task`` on each processor under this env's rule."""
        ready = self.data_ready_times(task)
        if not self.insertion:
            return np.maximum(ready, self.proc_available)
        dur = self.problem.costs[task]
        p = self.problem.n_procs
        prev_finish = np.concatenate([np.zeros((p, 1)), self._busy_finish[:, :-1]], axis=1)
        cand = np.maximum(prev_finish, ready[:, None])  # gap k opens after busy interval k-1
        fits = cand + dur[:, None] <= self._busy_start  # … and closes at busy interval k
        first = np.argmax(fits, axis=1)  # the gap after the last interval always fits
        return cand[np.arange(p), first]

    def finish_times(self, task: int) -> np.ndarray:
        """(P,) the earliest finish of ``task`` on each processor (its EFT)."""
        return self.start_times(task) + self.problem.costs[task]

    # -- action -----------------------------------------------------------------------------
    def step(self, task: int, proc: int) -> Placement:
        g = self.problem.graph
        if not 0 <= proc < self.problem.n_procs:
            raise IllegalActionError(f"no processor {proc} (the platform has {self.problem.n_procs})")
        if not 0 <= task < g.n_tasks or self.scheduled[task] or self.missing_parents[task] > 0:
            raise IllegalActionError(f"task {task} is not ready")
        before = self.makespan
        start = float(self.start_times(task)[proc])
        finish = start + float(self.problem.costs[task, proc])
        self.proc[task], self.start[task], self.finish[task] = proc, start, finish
        self.scheduled[task] = True
        self._insert_busy(proc, start, finish)
        self.proc_available[proc] = max(self.proc_available[proc], finish)
        self.steps += 1
        children = g.dst[g.out_edges(task)]
        self.missing_parents[children] -= 1
        newly = children[self.missing_parents[children] == 0]
        self.ready_since[newly] = self.steps
        return Placement(task, proc, start, finish, before, max(before, finish))

    def _insert_busy(self, proc: int, start: float, finish: float) -> None:
        k = int(self._busy_count[proc])
        row_s, row_f = self._busy_start[proc], self._busy_finish[proc]
        # a zero-length task goes before the intervals that start when it does: after them, the gap
        # that follows it would open at its finish, before theirs (a later task could overlap them)
        at = int(np.searchsorted(row_s[:k], start, side="left" if finish == start else "right"))
        row_s[at + 1:k + 1] = row_s[at:k].copy()
        row_f[at + 1:k + 1] = row_f[at:k].copy()
        row_s[at], row_f[at] = start, finish
        self._busy_count[proc] = k + 1

    def schedule(self) -> Schedule:
        """The finished schedule (every task placed)."""
        if not self.done:
            raise IllegalActionError(f"{int((~self.scheduled).sum())} task(s) not placed yet")
        return Schedule(self.proc.copy(), self.start.copy(), self.finish.copy())


def replay_order(problem: DagProblem, order_key: np.ndarray) -> np.ndarray:
    """The tasks by ``order_key``, ties by hop level, then index: a topological order whenever no
    child's key is below its parent's (start times, say, even with zero-cost tasks)."""
    return np.lexsort((np.arange(problem.n_tasks), problem.graph.level, order_key))


def replay(problem: DagProblem, procs: np.ndarray, order_key: np.ndarray) -> Schedule:
    """The real schedule of placing the tasks on ``procs`` in :func:`replay_order` through
    :class:`ListSchedulingEnv` with insertion: each at its earliest start there."""
    env = ListSchedulingEnv(problem, insertion=True)
    for task in replay_order(problem, order_key):
        env.step(int(task), int(procs[task]))
    return env.schedule()
