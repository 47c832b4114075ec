"""Makespan, speedup and SLR (scheduling/metrics/dag.py) on schedules whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from dag_builders import diamond_problem

from scheduling.dag import DagProblem, Platform, Schedule, TaskGraph
from scheduling.dag.schedulers import get_dag_scheduler
from scheduling.metrics.dag import (
    critical_path_min,
    critical_path_min_length,
    dag_metrics,
    sequential_time,
    slr,
    speedup,
)


def test_diamond_heft_speedup_1_and_slr_8_over_7() -> None:
    p = diamond_problem()
    s = get_dag_scheduler("heft").schedule(p)
    assert sequential_time(p) == 8.0 and critical_path_min(p) == [0, 2, 3] and critical_path_min_length(p) == 7.0
    m = dag_metrics(p, s)
    assert (m.makespan, m.speedup, m.slr) == (8.0, 1.0, pytest.approx(8 / 7))


def test_two_independent_tasks_on_two_processors() -> None:
    p = DagProblem(TaskGraph.from_edges(["x", "y"], []), Platform.uniform(2), np.array([[3.0, 4.0], [3.0, 4.0]]))
    s = Schedule(np.array([0, 1]), np.array([0.0, 0.0]), np.array([3.0, 4.0]))
    assert speedup(p, s) == pytest.approx(6 / 4)  # min(3 + 3, 4 + 4) / 4
    assert slr(p, s) == pytest.approx(4 / 3)  # the critical path is one task, min cost 3


def test_cp_min_uses_minimum_costs_not_means() -> None:
    g = TaskGraph.from_edges(["a", "b", "c"], [(0, 1, 100.0), (0, 2, 0.0)])
    p = DagProblem(g, Platform.uniform(2), np.array([[1, 1], [10, 1], [3, 3]], dtype=float))
    assert critical_path_min(p) == [0, 2]  # b's mean 5.5 is larger, but its min is 1; data ignored
    assert critical_path_min_length(p) == 4.0


def test_topcuoglu_metrics(topcuoglu: DagProblem) -> None:
    m = dag_metrics(topcuoglu, get_dag_scheduler("heft").schedule(topcuoglu))
    assert sequential_time(topcuoglu) == 127.0  # P1: 14+13+11+13+12+13+7+5+18+21
    assert m.speedup == pytest.approx(127 / 80)
    assert critical_path_min_length(topcuoglu) == 41.0  # n1 n2 n9 n10: 9 + 13 + 12 + 7
    assert m.slr == pytest.approx(80 / 41)


def test_zero_makespan_gives_nan_not_an_error() -> None:
    p = DagProblem(TaskGraph.from_edges(["x"], []), Platform.uniform(1), np.zeros((1, 1)))
    s = Schedule(np.array([0]), np.array([0.0]), np.array([0.0]))
    assert np.isnan(speedup(p, s)) and np.isnan(slr(p, s))
