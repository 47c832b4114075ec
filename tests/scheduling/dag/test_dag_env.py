"""The step-wise list-scheduling environment: readiness, insertion vs append, illegal actions."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.dag import (
    DagProblem,
    IllegalActionError,
    ListSchedulingEnv,
    Platform,
    TaskGraph,
    check_schedule,
)


def gap_problem() -> DagProblem:
    """a → b carrying 4 (bandwidth 1); c (cost 5) and d (cost 6) independent; two processors."""
    g = TaskGraph.from_edges(["a", "b", "c", "d"], [(0, 1, 4.0)])
    costs = np.array([[1, 1], [1, 1], [5, 5], [6, 6]], dtype=float)
    return DagProblem(g, Platform.uniform(2), costs)


def test_insertion_uses_an_idle_gap_that_is_long_enough() -> None:
    env = ListSchedulingEnv(gap_problem(), insertion=True)
    env.step(0, 1)  # a on P1 [0, 1]
    placed = env.step(1, 0)  # b on P0: its input arrives at 1 + 4 = 5
    assert (placed.start, placed.finish) == (5.0, 6.0)
    assert env.start_times(2)[0] == 0.0  # c (5) fits the gap [0, 5] on P0
    assert env.start_times(3)[0] == 6.0  # d (6) does not
    assert env.start_times(3)[1] == 1.0
    env.step(2, 0)
    assert env.start_times(3)[0] == 6.0 and env.proc_available.tolist() == [6.0, 1.0]


def test_a_zero_length_task_opens_no_gap_inside_a_busy_interval() -> None:
    """Z (cost 0) lands at the start of A's interval [0, 5]: the next task must still wait for A."""
    problem = DagProblem(TaskGraph.from_edges(["A", "Z", "B"], []), Platform.uniform(1),
                         np.array([[5.0], [0.0], [3.0]]))  # fmt: skip
    env = ListSchedulingEnv(problem, insertion=True)
    env.step(0, 0)
    assert (env.step(1, 0).start, env.start_times(2)[0]) == (0.0, 5.0)  # (was 0.0: B over A)
    env.step(2, 0)
    assert check_schedule(problem, env.schedule()) == []


def test_without_insertion_a_task_goes_after_the_last_one() -> None:
    env = ListSchedulingEnv(gap_problem(), insertion=False)
    env.step(0, 1)
    env.step(1, 0)
    assert env.start_times(2).tolist() == [6.0, 1.0]
    assert env.finish_times(2).tolist() == [11.0, 6.0]


def test_readiness_and_ready_since() -> None:
    env = ListSchedulingEnv(gap_problem())
    assert env.ready.tolist() == [0, 2, 3] and env.ready_since.tolist() == [0, -1, 0, 0]
    step = env.step(2, 0)
    assert (step.makespan_before, step.makespan_after) == (0.0, 5.0)
    env.step(0, 0)
    assert env.ready.tolist() == [1, 3] and env.ready_since[1] == 2
    env.step(1, 0)
    env.step(3, 1)
    assert env.done and env.schedule().makespan == 7.0  # a [5, 6] after c, b [6, 7]


def test_illegal_actions_are_refused() -> None:
    env = ListSchedulingEnv(gap_problem())
    with pytest.raises(IllegalActionError, match="not ready"):
        env.step(1, 0)
    with pytest.raises(IllegalActionError, match="no processor 2"):
        env.step(0, 2)
    with pytest.raises(IllegalActionError, match="not placed yet"):
        env.schedule()
    env.step(0, 0)
    with pytest.raises(IllegalActionError, match="not ready"):
        env.step(0, 1)  # already placed
    env.reset()
    assert env.ready.tolist() == [0, 2, 3] and not env.scheduled.any()
