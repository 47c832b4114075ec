from __future__ import annotations

import numpy as np

from inference.dag.features import (
    PROC_DIM,
    PROC_FEATURES,
    STATIC_FEATURES,
    TASK_DIM,
    dag_context,
    proc_features,
    task_view,
)
from scheduling.dag import DagProblem, ListSchedulingEnv, Platform, TaskGraph
from scheduling.dag.schedulers import get_dag_scheduler


def _walk(problem: DagProblem):
    """Yield (ctx, env, view) at every step of a HEFT run."""
    ctx = dag_context(problem)
    env = ListSchedulingEnv(problem)
    heft = get_dag_scheduler("heft")
    heft.prepare(problem)
    while not env.done:
        yield ctx, env, task_view(ctx, env)
        task = heft.select_task(env)
        env.step(task, heft.select_processor(env, task))


def test_shapes_dtype_and_no_nan(small_dags, topcuoglu):
    for problem in [*small_dags, topcuoglu]:
        for ctx, env, view in _walk(problem):
            assert ctx.static.shape == (problem.n_tasks, len(STATIC_FEATURES))
            assert view.x.shape == (len(env.ready), TASK_DIM) and view.x.dtype == np.float32
            assert np.array_equal(view.ready, env.ready)
            assert view.eft.shape == (len(env.ready), problem.n_procs)
            x_proc = proc_features(ctx, env, view, 0)
            assert x_proc.shape == (problem.n_procs, PROC_DIM) and x_proc.dtype == np.float32
            for x in (view.x, x_proc):
                assert np.all(np.isfinite(x)) and np.abs(x).max() <= 10.0


def test_eft_matches_the_environment(small_dags):
    for _ctx, env, view in _walk(small_dags[0]):
        for row, task in enumerate(view.ready):
            np.testing.assert_allclose(view.eft[row], env.finish_times(int(task)))


def test_rank_features_are_normalised_per_dag(small_dags):
    ctx = dag_context(small_dags[1])
    rank_u = ctx.static[:, STATIC_FEATURES.index("rank_u")]
    assert rank_u.max() == np.float32(1.0) and rank_u.min() > 0


def _scaled(problem: DagProblem, k: float) -> DagProblem:
    g = problem.graph
    return DagProblem(TaskGraph(g.names, g.src, g.dst, g.data * k), Platform.uniform(problem.n_procs),
                      problem.costs * k)


def test_features_do_not_depend_on_the_time_unit(small_dags):
    """Costs and data × 1000 (seconds → milliseconds): the same features, step by step."""
    a, b = small_dags[2], _scaled(small_dags[2], 1000.0)
    for (ca, ea, va), (cb, eb, vb) in zip(_walk(a), _walk(b), strict=True):
        np.testing.assert_allclose(va.x, vb.x, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(proc_features(ca, ea, va, 0), proc_features(cb, eb, vb, 0), rtol=1e-4, atol=1e-5)


def test_locality_points_at_the_parents_processor():
    """A chain a → b: once a sits on processor 2, b's data is all on processor 2."""
    g = TaskGraph(("a", "b"), np.array([0]), np.array([1]), np.array([5.0]))
    problem = DagProblem(g, Platform.uniform(3), np.ones((2, 3)))
    ctx, env = dag_context(problem), ListSchedulingEnv(problem)
    env.step(0, 2)
    here = proc_features(ctx, env, task_view(ctx, env), 0)[:, PROC_FEATURES.index("parent_comm_here")]
    np.testing.assert_allclose(here, [0.0, 0.0, 1.0])
