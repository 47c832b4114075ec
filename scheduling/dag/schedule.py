"""A DAG schedule (task → processor, start, finish) and the checker every scheduler's
output must pass.

A schedule is valid when
- every task is on a processor of the platform and starts at time >= 0;
- it runs exactly its cost there: ``finish - start == costs[task, proc]``;
- precedence holds with communication: for every edge ``i → j``,
  ``start[j] >= finish[i] + c(proc[i], proc[j])`` (zero on the same processor);
- no two tasks overlap on one processor (zero-length tasks may touch others).
All comparisons allow a small tolerance relative to the schedule's time scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduling.dag.problem import DagProblem


class InvalidScheduleError(AssertionError):
    """A schedule broke a rule; the message lists the first violations."""


@dataclass(frozen=True)
class Schedule:
    proc: np.ndarray  # (n,) int
    start: np.ndarray  # (n,) float
    finish: np.ndarray  # (n,) float

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if len(self.finish) else 0.0

    def tasks_on(self, proc: int) -> np.ndarray:
        """The tasks on ``proc`` in start order."""
        mine = np.flatnonzero(self.proc == proc)
        return mine[np.lexsort((self.finish[mine], self.start[mine]))]

    def as_rows(self, problem: DagProblem) -> list[dict[str, object]]:
        """One dict per task (name, processor name, start, finish), in start order."""
        order = np.lexsort((self.proc, self.start))
        return [{"task": problem.graph.names[i], "proc": problem.platform.names[self.proc[i]],
                 "start": float(self.start[i]), "finish": float(self.finish[i])} for i in order]  # fmt: skip


def check_schedule(problem: DagProblem, schedule: Schedule, *, rel_tol: float = 1e-9) -> list[str]:
    """Every rule the schedule breaks, as readable messages (empty when valid)."""
    g, n = problem.graph, problem.n_tasks
    proc = np.asarray(schedule.proc)
    start = np.asarray(schedule.start, dtype=np.float64)
    finish = np.asarray(schedule.finish, dtype=np.float64)
    if not (proc.shape == start.shape == finish.shape == (n,)):
        return [f"schedule arrays must have shape ({n},): proc {proc.shape}, start {start.shape}, "
                f"finish {finish.shape}"]  # fmt: skip
    problems: list[str] = []
    bad_proc = (proc < 0) | (proc >= problem.n_procs)
    problems += [f"task {g.names[i]!r} is on no processor of the platform ({proc[i]})" for i in np.flatnonzero(bad_proc)]
    if problems:
        return problems
    if not (np.all(np.isfinite(start)) and np.all(np.isfinite(finish))):
        return [f"task {g.names[i]!r} has no finite start/finish"
                for i in np.flatnonzero(~(np.isfinite(start) & np.isfinite(finish)))]  # fmt: skip
    tol = rel_tol * max(1.0, float(np.abs(finish).max(initial=0.0)))
    problems += [f"task {g.names[i]!r} starts before time 0 ({start[i]:g})" for i in np.flatnonzero(start < -tol)]
    cost = problem.costs[np.arange(n), proc]
    wrong = np.abs(finish - start - cost) > tol
    problems += [f"task {g.names[i]!r} runs {finish[i] - start[i]:g} on {problem.platform.names[proc[i]]} "
                 f"but costs {cost[i]:g} there" for i in np.flatnonzero(wrong)]  # fmt: skip
    if g.n_edges:
        comm = problem.platform.comm_cost(g.data, proc[g.src], proc[g.dst])
        early = start[g.dst] < finish[g.src] + comm - tol
        problems += [f"task {g.names[g.dst[k]]!r} starts at {start[g.dst[k]]:g} before its input from "
                     f"{g.names[g.src[k]]!r} arrives at {finish[g.src[k]] + comm[k]:g}"
                     for k in np.flatnonzero(early)]  # fmt: skip
    order = np.lexsort((finish, start, proc))
    same = proc[order[1:]] == proc[order[:-1]]
    overlap = same & (start[order[1:]] < finish[order[:-1]] - tol)
    problems += [f"tasks {g.names[order[k]]!r} and {g.names[order[k + 1]]!r} overlap on "
                 f"{problem.platform.names[proc[order[k]]]}" for k in np.flatnonzero(overlap)]  # fmt: skip
    return problems


def assert_valid_schedule(problem: DagProblem, schedule: Schedule) -> None:
    """Raise :class:`InvalidScheduleError` listing up to ten violations."""
    problems = check_schedule(problem, schedule)
    if problems:
        more = f"\n… and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise InvalidScheduleError(f"invalid schedule for {problem.name or 'a DAG'}:\n" + "\n".join(problems[:10]) + more)
