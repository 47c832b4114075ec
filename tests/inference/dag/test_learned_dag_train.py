from __future__ import annotations

import math

from inference.dag.dataset import build_teacher_data
from inference.dag.model import DagPolicyNet, NetConfig
from inference.dag.teacher import teacher_trajectory
from inference.dag.train import dagger_samples, train_imitation, train_reinforce
from scheduling.dag import DagGeneratorConfig, training_dags
from scheduling.dag.schedulers import get_dag_scheduler

TINY = DagGeneratorConfig(tasks_min=8, tasks_max=14)


def test_teacher_is_never_worse_than_heft(small_dags):
    for problem in small_dags[:3]:
        samples, span = teacher_trajectory(problem, k=2)
        assert len(samples) == problem.n_tasks
        assert span <= get_dag_scheduler("heft").schedule(problem).makespan * (1 + 1e-9)


def test_teacher_data_is_cached(tmp_path):
    cache = tmp_path / "teacher.pkl"
    first = build_teacher_data(TINY, 2, seed=1, k=2, cache=cache)
    assert cache.exists()
    again = build_teacher_data(TINY, 2, seed=1, k=2, cache=cache)
    assert len(again.samples) == len(first.samples) and again.teacher_vs_heft == first.teacher_vs_heft


def test_a_teacher_cache_of_another_feature_layout_is_not_reused(tmp_path):
    """(Found by review: a cache written by the code of feature set 2, whose key had the same teacher version,
    was reused by feature set 3's training: imitation crashed on the processor features' column count.)"""
    import pickle
    from dataclasses import replace

    from inference.dag.dataset import TEACHER_VERSION
    from inference.dag.features import PROC_DIM

    cache = tmp_path / "teacher.pkl"
    fresh = build_teacher_data(TINY, 1, seed=1, k=2)
    narrow = [replace(s, x_proc=s.x_proc[:, : PROC_DIM - 5]) for s in fresh.samples]  # set 2: 5 columns fewer
    stale = replace(fresh, samples=narrow)
    with cache.open("wb") as f:  # the key as the older code wrote it: no feature layout in it
        pickle.dump(((TEACHER_VERSION, 1, 1, 2, repr(TINY)), stale), f)
    data = build_teacher_data(TINY, 1, seed=1, k=2, cache=cache)
    assert {s.x_proc.shape[1] for s in data.samples} == {PROC_DIM}
    assert build_teacher_data(TINY, 1, seed=1, k=2, cache=cache).samples[0].x_proc.shape[1] == PROC_DIM  # rewritten


def test_imitation_reduces_the_loss():
    data = build_teacher_data(TINY, 3, seed=2, k=2)
    net = DagPolicyNet(NetConfig(hidden=16))
    losses = train_imitation(net, data.samples, epochs=8, seed=0, batch_size=16, lr=5e-3, show=False)
    assert losses[-1] < 0.8 * losses[0]


def test_reinforce_runs_and_keeps_the_best_checkpoint():
    net = DagPolicyNet(NetConfig(hidden=8))
    valid = list(training_dags(TINY, 2, seed=3))
    out = train_reinforce(net, TINY, dags=2, samples=2, seed=0, valid=valid, eval_every=1)
    curve = out["curve"]
    assert len(curve) == 3 and math.isfinite(out["valid_vs_heft"])
    assert out["valid_vs_heft"] == min(score for _, score in curve)


def test_dagger_labels_every_state_the_student_visits():
    problems = list(training_dags(TINY, 2, seed=4))
    samples = dagger_samples(DagPolicyNet(NetConfig(hidden=8)), problems, k=2)
    assert len(samples) == sum(p.n_tasks for p in problems)
    assert all(0 <= s.task < len(s.x_task) and 0 <= s.proc < len(s.x_proc) for s in samples)
