"""The critical-path local search: a replay never starts a task later, the critical path is the
chain that sets the makespan, and ``improve`` returns valid schedules never longer than its input,
shorter where a critical task can move."""

from __future__ import annotations

import numpy as np
from dag_builders import chain_problem, diamond_problem

from scheduling.dag import (
    DagGeneratorConfig,
    DagProblem,
    Platform,
    Schedule,
    TaskGraph,
    check_schedule,
    held_out_dags,
    replay,
)
from scheduling.dag.env import replay_order
from scheduling.dag.local_search import critical_tasks, improve
from scheduling.dag.schedulers import get_dag_scheduler


def small_dags(n: int = 6) -> list[DagProblem]:
    return list(held_out_dags(DagGeneratorConfig(tasks_min=20, tasks_max=40, processors=4), n, seed=3))


def test_a_replay_in_start_order_starts_no_task_later(topcuoglu):
    for problem in [topcuoglu, *small_dags()]:
        for name in ("heft", "cpop", "fifo"):
            schedule = get_dag_scheduler(name).schedule(problem)
            again = replay(problem, schedule.proc, schedule.start)
            assert check_schedule(problem, again) == []
            assert (again.start <= schedule.start + 1e-9).all() and np.array_equal(again.proc, schedule.proc)


def test_the_critical_path_is_the_chain_that_sets_the_makespan():
    chain = chain_problem([[2, 3], [4, 1], [1, 5]], [1.0, 1.0])
    schedule = replay(chain, np.array([0, 0, 0]), np.arange(3))  # every task waits for the one before
    assert critical_tasks(chain, schedule) == [0, 1, 2]
    diamond = diamond_problem()
    heft = get_dag_scheduler("heft").schedule(diamond)  # a P0 [0, 2], c P0 [2, 6], b P0 [6, 7], d P0 [7, 8]
    assert critical_tasks(diamond, heft) == [0, 1, 2, 3]
    # two independent tasks on two processors: only the one that ends last is critical
    pair = DagProblem(TaskGraph.from_edges(["x", "y"], []), Platform.uniform(2), np.array([[5.0, 5.0], [3.0, 3.0]]))
    assert critical_tasks(pair, replay(pair, np.array([0, 1]), np.arange(2))) == [0]


def test_a_critical_task_moves_to_an_idle_processor():
    # two independent tasks one after another on P0, P1 idle: moving one halves the makespan
    pair = DagProblem(TaskGraph.from_edges(["x", "y"], []), Platform.uniform(2), np.array([[4.0, 4.0], [4.0, 4.0]]))
    serial = Schedule(np.array([0, 0]), np.array([0.0, 4.0]), np.array([4.0, 8.0]))
    assert check_schedule(pair, serial) == []
    better = improve(pair, serial)
    assert check_schedule(pair, better) == [] and better.makespan == 4.0


def test_a_critical_task_moves_up_in_the_order():
    # found by a random search over 4-task DAGs: t0, t1, t2 → t3 (t1's edge carries 2), two processors
    graph = TaskGraph.from_edges(["t0", "t1", "t2", "t3"], [(0, 3, 0.0), (1, 3, 2.0), (2, 3, 0.0)])
    problem = DagProblem(graph, Platform.uniform(2), np.array([[6.0, 3.0], [7.0, 6.0], [7.0, 2.0], [4.0, 7.0]]))
    schedule = replay(problem, np.array([0, 1, 0, 0]), np.arange(4))
    assert schedule.makespan == 17.0
    assert improve(problem, schedule, reorder=False).makespan == 15.0  # processor moves alone stop here
    better = improve(problem, schedule)
    assert check_schedule(problem, better) == [] and better.makespan == 13.0


def test_improve_is_valid_never_worse_and_helps_on_random_dags(topcuoglu):
    heft = get_dag_scheduler("heft")
    ratios = []
    for problem in [topcuoglu, *small_dags()]:
        schedule = heft.schedule(problem)
        better = improve(problem, schedule)
        assert check_schedule(problem, better) == []
        assert better.makespan <= schedule.makespan
        ratios.append(better.makespan / schedule.makespan)
    assert min(ratios) < 0.99  # it finds something on these DAGs (deterministic: the same every run)
    assert improve(topcuoglu, heft.schedule(topcuoglu), rounds=0).makespan <= 80.0


def test_zero_cost_tasks_keep_the_order_topological_and_the_schedule_valid():
    from inference.dag.search import rollout_schedule

    # a zero-cost parent and its zero-cost child start and finish together; the child has the lower index
    graph = TaskGraph.from_edges(["child", "parent", "x"], [(1, 0, 1.0), (2, 1, 1.0)])
    problem = DagProblem(graph, Platform.uniform(2), np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 3.0]]))
    heft = get_dag_scheduler("heft").schedule(problem)
    order = list(replay_order(problem, heft.start))  # parent and child start (and finish) together
    assert order.index(1) < order.index(0)
    for schedule in (improve(problem, heft), rollout_schedule(problem, None)):
        assert check_schedule(problem, schedule) == []
    # a zero-cost task between two others on one processor: nothing may overlap after the replay
    trio = DagProblem(TaskGraph.from_edges(["A", "Z", "B"], []), Platform.uniform(1), np.array([[5.0], [0.0], [3.0]]))
    serial = Schedule(np.array([0, 0, 0]), np.array([0.0, 5.0, 5.0]), np.array([5.0, 5.0, 8.0]))
    assert check_schedule(trio, serial) == []
    better = improve(trio, serial)
    assert check_schedule(trio, better) == [] and better.makespan == 8.0
