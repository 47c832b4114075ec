"""The random DAG generator: deterministic per seed, within its bounds, exact CCR."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.dag import DagGeneratorConfig, generate_dag, held_out_dags, training_dags


def same(a, b) -> bool:  # noqa: ANN001
    return (a.graph.names == b.graph.names and np.array_equal(a.graph.src, b.graph.src)
            and np.array_equal(a.graph.dst, b.graph.dst) and np.array_equal(a.graph.data, b.graph.data)
            and np.array_equal(a.costs, b.costs))  # fmt: skip


def test_same_seed_same_dag_other_seed_other_dag() -> None:
    cfg = DagGeneratorConfig()
    assert same(generate_dag(cfg, 7), generate_dag(cfg, 7))
    assert not same(generate_dag(cfg, 7), generate_dag(cfg, 8))
    held = list(held_out_dags(cfg, 3, seed=5))
    assert all(same(a, b) for a, b in zip(held, held_out_dags(cfg, 3, seed=5), strict=True))
    train = list(training_dags(cfg, 3, seed=5))
    assert not any(same(a, b) for a in held for b in train)
    assert [p.name for p in held] == ["held-out-5-0", "held-out-5-1", "held-out-5-2"]


def test_task_counts_stay_in_bounds_and_cover_them() -> None:
    cfg = DagGeneratorConfig(tasks_min=20, tasks_max=150)
    sizes = [generate_dag(cfg, s).n_tasks for s in range(60)]
    assert min(sizes) >= 20 and max(sizes) <= 150 and max(sizes) - min(sizes) > 60
    assert generate_dag(DagGeneratorConfig(tasks_min=33, tasks_max=33), 1).n_tasks == 33


@pytest.mark.parametrize("ccr", [0.1, 1.0, 5.0])
def test_ccr_is_exact_and_heterogeneity_bounded(ccr: float) -> None:
    beta = 0.8
    p = generate_dag(DagGeneratorConfig(ccr=ccr, beta=beta, processors=5), 3)
    assert p.comm_to_comp_ratio() == pytest.approx(ccr)
    ratio = p.costs.max(axis=1) / p.costs.min(axis=1)
    assert ratio.max() <= (1 + beta / 2) / (1 - beta / 2) + 1e-12 and ratio.max() > 1.2
    flat = generate_dag(DagGeneratorConfig(beta=0.0, ccr=0.0), 3)
    assert np.all(flat.costs == flat.costs[:, :1]) and np.all(flat.graph.data == 0)


def test_levels_shape_and_log_normal_costs() -> None:
    cfg = DagGeneratorConfig(tasks_min=100, tasks_max=100, shape=1.0)
    p = generate_dag(cfg, 11)
    assert p.graph.level.max() + 1 == 10  # round(sqrt(100) / 1.0) levels
    assert np.all(p.graph.level[p.graph.dst] > p.graph.level[p.graph.src])
    assert np.all(p.graph.in_degree[p.graph.level > 0] >= 1)
    wide = generate_dag(DagGeneratorConfig(tasks_min=100, tasks_max=100, shape=4.0), 11)
    deep = generate_dag(DagGeneratorConfig(tasks_min=100, tasks_max=100, shape=0.25), 11)
    assert wide.graph.level.max() + 1 == 2 and deep.graph.level.max() + 1 == 40
    costs = np.concatenate([generate_dag(DagGeneratorConfig(beta=0.0), s).costs[:, 0] for s in range(40)])
    assert costs.mean() == pytest.approx(10.0, rel=0.15)
    log = np.log(costs)
    assert abs(float(((log - log.mean()) ** 3).mean())) < 0.2 * log.std() ** 3  # log costs ~ symmetric
    assert np.mean(costs > costs.mean()) < 0.5  # right-skewed on the linear scale


def test_invalid_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="tasks_min <= tasks_max"):
        DagGeneratorConfig(tasks_min=50, tasks_max=20)
    with pytest.raises(ValueError, match="beta < 2.*ccr >= 0|ccr >= 0.*beta < 2"):
        DagGeneratorConfig(beta=2.0, ccr=-1)


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_a_stream_seed_outside_32_bits_is_refused(seed: int) -> None:
    # found by review: numpy splits a larger seed into two words, so held-out seed 1 gave the first
    # training DAG of seed 2**32 (the held-out and training streams were no longer disjoint)
    with pytest.raises(ValueError, match="2\\*\\*32"):
        next(held_out_dags(DagGeneratorConfig(), 1, seed))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        next(training_dags(DagGeneratorConfig(), 1, seed))
