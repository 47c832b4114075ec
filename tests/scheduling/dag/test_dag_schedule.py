"""The validity checker catches each kind of broken schedule."""

from __future__ import annotations

import numpy as np
import pytest
from dag_builders import chain_problem

from scheduling.dag import (
    DagProblem,
    InvalidScheduleError,
    Platform,
    Schedule,
    TaskGraph,
    assert_valid_schedule,
    check_schedule,
)


def problem() -> DagProblem:
    """t0 → t1 carrying 5 (unit bandwidth); t2 independent. Costs on (P0, P1)."""
    g = TaskGraph.from_edges(["t0", "t1", "t2"], [(0, 1, 5.0)])
    return DagProblem(g, Platform.uniform(2), np.array([[2.0, 4.0], [3.0, 3.0], [1.0, 1.0]]))


def sched(proc: list[int], start: list[float]) -> Schedule:
    proc_a, start_a = np.array(proc), np.array(start, dtype=float)
    return Schedule(proc_a, start_a, start_a + problem().costs[np.arange(3), proc_a])


def test_a_valid_schedule_passes() -> None:
    assert check_schedule(problem(), sched([0, 0, 1], [0, 2, 0])) == []
    assert check_schedule(problem(), sched([0, 1, 0], [0, 7, 2])) == []  # 2 + 5 communication


def test_communication_delay_is_enforced() -> None:
    [msg] = check_schedule(problem(), sched([0, 1, 0], [0, 6, 2]))
    assert "'t1' starts at 6 before its input from 't0' arrives at 7" in msg
    with pytest.raises(InvalidScheduleError, match="invalid schedule"):
        assert_valid_schedule(problem(), sched([0, 1, 0], [0, 6, 2]))


def test_overlap_wrong_duration_and_bad_processor_are_reported() -> None:
    assert any("overlap on P0" in m for m in check_schedule(problem(), sched([0, 0, 0], [0, 2, 4])))
    s = sched([0, 0, 1], [0, 2, 0])
    longer = Schedule(s.proc, s.start, s.finish + np.array([0, 0, 1.0]))
    assert check_schedule(problem(), longer) == ["task 't2' runs 2 on P1 but costs 1 there"]
    nowhere = Schedule(np.array([0, 0, 7]), s.start, s.finish)
    assert check_schedule(problem(), nowhere) == ["task 't2' is on no processor of the platform (7)"]
    negative = sched([0, 0, 1], [0, 2, -1])
    assert check_schedule(problem(), negative) == ["task 't2' starts before time 0 (-1)"]


def test_zero_length_tasks_may_touch_but_not_sit_inside_another() -> None:
    p = chain_problem([[0.0], [4.0], [0.0]], [0.0, 0.0])
    ok = Schedule(np.zeros(3, dtype=int), np.array([0.0, 0.0, 4.0]), np.array([0.0, 4.0, 4.0]))
    assert check_schedule(p, ok) == []
    free = DagProblem(TaskGraph.from_edges(["a", "b"], []), Platform.uniform(1), np.array([[4.0], [0.0]]))
    inside = Schedule(np.zeros(2, dtype=int), np.array([0.0, 2.0]), np.array([4.0, 2.0]))
    assert any("overlap" in m for m in check_schedule(free, inside))
