"""HEFT, CPOP and FIFO: the paper's numbers on Topcuoglu's graph, hand-checked schedules,
and a valid schedule from every scheduler on generated DAGs of many seeds and shapes."""

from __future__ import annotations

import numpy as np
import pytest
from dag_builders import diamond_problem

from scheduling.dag import (
    DagGeneratorConfig,
    DagProblem,
    ListSchedulingEnv,
    TaskGraph,
    assert_valid_schedule,
    generate_dag,
)
from scheduling.dag.schedulers import (
    UnknownDagSchedulerError,
    available_dag_schedulers,
    get_dag_scheduler,
    run_policy,
)
from scheduling.dag.schedulers.fifo import Fifo

SCHEDULERS = ["heft", "cpop", "fifo"]  # heft-rollout: tests/scheduling/dag/test_dag_rollout.py


def test_registry_lists_and_refuses_unknown_names() -> None:
    assert set(SCHEDULERS) <= set(available_dag_schedulers())
    assert get_dag_scheduler("heft").name == "heft"
    with pytest.raises(UnknownDagSchedulerError, match="unknown DAG scheduler 'nope'; available: cpop, fifo, heft, heft-rollout"):
        get_dag_scheduler("nope")


def test_topcuoglu_heft_80_and_cpop_86(topcuoglu: DagProblem) -> None:
    heft = get_dag_scheduler("heft").schedule(topcuoglu)
    cpop = get_dag_scheduler("cpop").schedule(topcuoglu)
    assert heft.makespan == 80.0 and cpop.makespan == 86.0  # Topcuoglu et al. 2002, Fig. 4 / 5
    assert_valid_schedule(topcuoglu, heft)
    assert_valid_schedule(topcuoglu, cpop)
    # the paper's HEFT schedule: n1 n3 n5 n7 on P3, n2 n8 on P1, n4 n6 n9 n10 on P2
    assert (heft.proc + 1).tolist() == [3, 1, 3, 2, 3, 2, 3, 1, 2, 2]
    # CPOP puts the critical path n1 n2 n9 n10 on the critical-path processor P2
    assert cpop.proc[[0, 1, 8, 9]].tolist() == [1, 1, 1, 1]


def test_heft_on_the_diamond_by_hand() -> None:
    p = diamond_problem()
    s = get_dag_scheduler("heft").schedule(p)
    assert s.proc.tolist() == [0, 0, 0, 0]
    assert s.start.tolist() == [0, 6, 2, 7] and s.makespan == 8.0


def test_fifo_takes_tasks_in_the_order_they_became_ready() -> None:
    # a → c; b, d independent; c has the largest cost, so rank order would be a, c, …
    g = TaskGraph.from_edges(["a", "b", "c", "d"], [(0, 2, 0.0)])
    p = DagProblem(g, diamond_problem().platform, np.array([[1, 1], [1, 1], [9, 9], [1, 1]], dtype=float))
    picked: list[int] = []

    class Logged(Fifo):
        def select_task(self, env: ListSchedulingEnv) -> int:
            picked.append(super().select_task(env))
            return picked[-1]

    assert_valid_schedule(p, Logged().schedule(p))
    assert picked == [0, 1, 3, 2]  # c became ready at step 1, after b and d (step 0)


class RandomTwoStage:
    """A stand-in for a learned policy: a random ready task, then a random processor."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def select_task(self, env: ListSchedulingEnv) -> int:
        return int(self.rng.choice(env.ready))

    def select_processor(self, env: ListSchedulingEnv, task: int) -> int:
        return int(self.rng.integers(env.problem.n_procs))


CONFIGS = [
    DagGeneratorConfig(tasks_min=20, tasks_max=150, processors=4),
    DagGeneratorConfig(tasks_min=20, tasks_max=60, processors=1, ccr=5.0),
    DagGeneratorConfig(tasks_min=20, tasks_max=80, processors=8, shape=2.0, density=0.5, ccr=0.1, beta=1.5),
    DagGeneratorConfig(tasks_min=20, tasks_max=80, processors=3, shape=0.5, ccr=10.0, beta=0.0),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "one-proc", "wide", "chain-heavy-comm"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 17])
def test_every_scheduler_is_valid_on_generated_dags(config: DagGeneratorConfig, seed: int) -> None:
    p = generate_dag(config, seed)
    for name in SCHEDULERS:
        assert_valid_schedule(p, get_dag_scheduler(name).schedule(p))
    insertion = seed % 2 == 0
    assert_valid_schedule(p, run_policy(ListSchedulingEnv(p, insertion=insertion), RandomTwoStage(seed)))


def test_zero_cost_tasks_and_edges_are_scheduled_validly() -> None:
    g = TaskGraph.from_edges(["z0", "z1", "z2", "x"], [(0, 1, 0.0), (1, 2, 0.0), (3, 1, 2.0)])
    p = DagProblem(g, diamond_problem().platform, np.array([[0, 0], [0, 0], [0, 0], [1, 2]], dtype=float))
    for name in SCHEDULERS:
        assert_valid_schedule(p, get_dag_scheduler(name).schedule(p))
