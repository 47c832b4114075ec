"""The rollout over HEFT (scheduling.dag.rollout) and ``heft-rollout``: HEFT's completions are
HEFT's own schedule, HEFT's action is the first candidate, the search never loses to HEFT and
beats it on Topcuoglu's graph, and a proposer's candidates are tried besides HEFT's."""

from __future__ import annotations

import numpy as np
import pytest
from dag_builders import chain_problem, diamond_problem

from scheduling.dag import (
    DagGeneratorConfig,
    DagProblem,
    ListSchedulingEnv,
    assert_valid_schedule,
    generate_dag,
)
from scheduling.dag.ranks import heft_upward_ranks
from scheduling.dag.rollout import heft_candidates, heft_complete, rollout_schedule
from scheduling.dag.schedulers import get_dag_scheduler

ZERO_COSTS = DagGeneratorConfig(tasks_min=20, tasks_max=40, processors=3, ccr=0.0)


def _heft(problem: DagProblem):  # noqa: ANN202
    return get_dag_scheduler("heft").schedule(problem)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heft_completion_from_the_start_is_heft_s_schedule(seed: int) -> None:
    for problem in (generate_dag(DagGeneratorConfig(tasks_min=20, tasks_max=60), seed), generate_dag(ZERO_COSTS, seed)):
        env = ListSchedulingEnv(problem, insertion=True)
        span = heft_complete(env, heft_upward_ranks(problem))
        heft = _heft(problem)
        assert span == heft.makespan
        assert env.schedule().proc.tolist() == heft.proc.tolist()


def test_heft_completion_breaks_near_ties_as_heft_does() -> None:
    """Processor 1 finishes the task 1e-13 earlier: within HEFT's tie tolerance, so the lowest index
    wins in ``heft`` and must win in the rollout's completions (``argmin`` took processor 1)."""
    problem = chain_problem([[1.0 + 1e-13, 1.0], [1.0, 1.0]], [0.0])
    env = ListSchedulingEnv(problem, insertion=True)
    heft_complete(env, heft_upward_ranks(problem))
    assert env.schedule().proc.tolist() == _heft(problem).proc.tolist() == [0, 0]
    assert heft_candidates(ListSchedulingEnv(problem, insertion=True), heft_upward_ranks(problem))[0] == (0, 0)


def test_a_clone_is_independent_of_its_original() -> None:
    problem = diamond_problem()
    env = ListSchedulingEnv(problem, insertion=True)
    env.step(0, 0)
    twin = env.clone()
    twin.step(2, 1)
    assert env.ready.tolist() == [1, 2] and twin.ready.tolist() == [1]
    assert not env.scheduled[2] and np.isnan(env.finish[2]) and env.steps == 1
    assert env.makespan == 2.0 and twin.makespan > 2.0


def test_heft_s_action_comes_first_and_every_processor_is_a_candidate(topcuoglu) -> None:  # noqa: ANN001
    rank = heft_upward_ranks(topcuoglu)
    env = ListSchedulingEnv(topcuoglu, insertion=True)
    heft = get_dag_scheduler("heft")
    heft.prepare(topcuoglu)
    while not env.done:
        candidates = heft_candidates(env, rank)
        task = heft.select_task(env)
        assert candidates[0] == (task, heft.select_processor(env, task))
        assert sorted(p for _, p in candidates) == list(range(topcuoglu.n_procs))
        env.step(*candidates[0])


def test_heft_rollout_beats_heft_on_topcuoglu_s_graph(topcuoglu) -> None:  # noqa: ANN001
    schedule = get_dag_scheduler("heft-rollout").schedule(topcuoglu)
    assert_valid_schedule(topcuoglu, schedule)
    assert schedule.makespan < 80.0  # HEFT's, Topcuoglu et al. 2002


@pytest.mark.parametrize("seed", [0, 1])
def test_heft_rollout_is_never_worse_than_heft(seed: int) -> None:
    for config in (DagGeneratorConfig(tasks_min=20, tasks_max=40), ZERO_COSTS):
        problem = generate_dag(config, seed)
        for polish in (False, True):
            schedule = rollout_schedule(problem, polish=polish)
            assert_valid_schedule(problem, schedule)
            assert schedule.makespan <= _heft(problem).makespan * (1 + 1e-9)


def test_a_proposer_s_candidates_are_tried_besides_heft_s(topcuoglu) -> None:  # noqa: ANN001
    seen: list[list[tuple[int, int]]] = []

    def propose(env: ListSchedulingEnv, rank: np.ndarray) -> list[tuple[int, int]]:
        pairs = [(int(t), p) for t in env.ready for p in range(env.problem.n_procs)]
        seen.append(pairs)
        return pairs

    wide = rollout_schedule(topcuoglu, propose, polish=False)
    assert len(seen) == topcuoglu.n_tasks  # asked once a step
    assert_valid_schedule(topcuoglu, wide)
    assert wide.makespan <= rollout_schedule(topcuoglu, polish=False).makespan


def test_a_pair_a_proposer_repeats_is_tried_once(topcuoglu, monkeypatch) -> None:  # noqa: ANN001
    import scheduling.dag.rollout as rollout

    completions = []
    real = rollout.heft_complete
    monkeypatch.setattr(rollout, "heft_complete", lambda env, rank: completions.append(1) or real(env, rank))

    def tries(times: int) -> int:
        completions.clear()
        rollout.rollout_schedule(topcuoglu, lambda env, rank: [(int(env.ready[-1]), 0)] * times, polish=False)
        return len(completions)

    assert tries(3) == tries(1)
