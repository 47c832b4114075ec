"""fgd: the placement that increases fragmentation least, on cases computed by hand."""

from __future__ import annotations

import numpy as np
from sched_builders import job, node, snap

from scheduling.metrics.fragmentation import PodType, Workload
from scheduling.policies import get_policy
from scheduling.policies.fgd import FGD

HALF = Workload((PodType(1000, 500, 1),), (1.0,))  # every future pod wants half a GPU


def _choose(policy: FGD, s, j) -> tuple[str, tuple[int, ...] | None]:
    scores = policy.score(j, s, np.ones(s.num_nodes, dtype=bool))
    best = int(np.argmax(scores))
    return str(s.node_ids[best]), policy.select_gpus(s, best, j)


def test_prefers_the_node_where_the_leftover_still_fits_the_workload():
    # a 200m pod on the 600m-free GPU leaves 400m, too little for a 500m pod (+400 fragment);
    # on the free GPU it leaves 800m (no fragment). best-fit takes the tighter GPU, FGD does not.
    s = snap(node("tight", gpus=1, gpu_alloc=(400,)), node("fresh", gpus=1))
    j = job(gpus=1, share=200)
    assert _choose(FGD(HALF), s, j) == ("fresh", (0,))
    scores = get_policy("best-fit").score(j, s, np.ones(2, dtype=bool))
    assert s.node_ids[int(np.argmax(scores))] == "tight"


def test_chooses_the_gpu_inside_the_node():
    s = snap(node("n", gpus=2, gpu_alloc=(0, 300)))  # free 1000m and 700m
    # 300m on GPU 1 leaves 400m (a fragment); on GPU 0 it leaves 700m and 700m (none)
    assert _choose(FGD(HALF), s, job(gpus=1, share=300)) == ("n", (0,))


def test_scores_are_the_simulators_quantised_sigmoid():
    s = snap(node("tight", gpus=1, gpu_alloc=(400,)), node("fresh", gpus=1))
    scores = FGD(HALF).score(job(gpus=1, share=200), s, np.ones(2, dtype=bool))
    assert list(scores) == [np.floor(100 / (1 + np.exp(0.4))), 50.0]  # ΔF = +400 and 0
    smooth = FGD(HALF, quantize=False).score(job(gpus=1, share=200), s, np.ones(2, dtype=bool))
    assert smooth[0] == 100 / (1 + np.exp(0.4))


def test_whole_gpu_pods_take_fully_free_gpus_and_infeasible_nodes_score_minus_inf():
    s = snap(node("a", gpus=2, gpu_alloc=(1000, 0)), node("b", gpus=2, gpu_alloc=(200, 0)))
    policy = FGD(HALF)
    scores = policy.score(job(gpus=1), s, np.array([True, False]))
    assert scores[1] == -np.inf and np.isfinite(scores[0])
    assert policy.select_gpus(s, 0, job(gpus=1)) == (1,)
    assert policy.score(job(gpus=2), s, np.ones(2, dtype=bool))[0] == -np.inf  # only one free GPU


def test_cpu_only_pods_avoid_starving_a_node_of_the_cpu_its_gpus_need():
    # the workload's pods need 8 cores; taking 4 of "small"'s 10 cores strands its whole GPU
    wl = Workload((PodType(8000, 1000, 1),), (1.0,))
    s = snap(node("small", gpus=1, cpu=10_000), node("big", gpus=1, cpu=64_000))
    assert _choose(FGD(wl), s, job(cpu=4000)) == ("big", ())


def test_without_a_workload_it_estimates_one_from_the_pods_it_sees():
    policy = get_policy("fgd")
    assert policy.workload() is None
    s = snap(node("n", gpus=1))
    policy.score(job("a", gpus=1, share=500), s, np.ones(1, dtype=bool))
    policy.score(job("a", gpus=1, share=500), s, np.ones(1, dtype=bool))  # the same pod again
    policy.score(job("b", cpu=2000), s, np.ones(1, dtype=bool))
    wl = policy.workload()
    assert wl is not None and dict(zip(wl.types, wl.weights, strict=True)) == {
        PodType(1000, 500, 1): 0.5, PodType(2000, 0, 0): 0.5}  # fmt: skip


def test_a_pod_list_as_workload_is_estimated_like_the_simulator():
    pods = [job(f"s{i}", gpus=1, share=500) for i in range(6)] + [job(f"w{i}", gpus=2) for i in range(3)]
    pods.append(job("rare", gpus=1, share=100))
    wl = FGD(pods, coverage=0.9).fixed_workload
    assert wl is not None
    assert wl.types == (PodType(1000, 500, 1), PodType(1000, 1000, 2))  # 90 % covered by the top two
    assert wl.weights == (6 / 9, 3 / 9)


def test_score_many_equals_scoring_each_job_on_the_same_nodes():
    """The batched scoring the learned model's features use: every kind of pod (CPU-only,
    whole GPUs, a share of one), on a partly used cluster of mixed nodes, bit for bit."""
    import pytest

    from scheduling.gpu_select import select_gpus

    nodes = [node(f"n{i}", cpu=(8000, 32000, 64000)[i % 3], gpus=(0, 2, 4, 8)[i % 4],
                  model=("T4", "A10")[i % 2] if i % 4 else None) for i in range(16)]  # fmt: skip
    s = snap(*nodes)
    used = [job("a", cpu=2000, gpus=1, share=300), job("b", cpu=4000, gpus=2, share=1000),
            job("c", cpu=1000, gpus=1, share=700), job("d", cpu=1000, gpus=1, share=750)]  # fmt: skip
    for i, j in enumerate(used):  # (d leaves a GPU with exactly the 250m the "share" pod asks)
        k = (1, 2, 3, 5)[i]
        s.reserve(k, j, select_gpus(s, k, j))
    workload = Workload((PodType(1000, 500, 1), PodType(4000, 1000, 2), PodType(2000, 250, 1)), (0.5, 0.3, 0.2))
    fgd = FGD(workload, quantize=False)
    pods = [job("cpu", cpu=3000), job("whole1", cpu=2000, gpus=1, share=1000), job("whole4", cpu=8000, gpus=4, share=1000),
            job("share", gpus=1, share=250), job("share2", cpu=6000, gpus=1, share=800)]  # fmt: skip
    rows = np.array([0, 1, 2, 3, 5, 6, 7, 9, 15])
    mask = np.zeros(16, dtype=bool)
    mask[rows] = True
    many = fgd.score_many(pods, s, rows)
    np.testing.assert_array_equal(many, np.array([fgd.score(p, s, mask)[rows] for p in pods]))
    # scores alone try each node's GPUs of equal free milli once: the same as trying every GPU
    t = fgd.tables(s, workload)
    for p in pods:
        np.testing.assert_array_equal(fgd._evaluate(t, s, rows, p, gpus=False)[0], fgd._evaluate(t, s, rows, p)[0])
    assert np.isinf(many).any() and np.isfinite(many).any()
    with pytest.raises(ValueError, match="fixed workload"):
        FGD().score_many(pods, s, rows)


def test_the_estimate_remembers_a_bounded_number_of_job_ids(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Found by review: a worker's FGD kept the id of every job it ever scored (for months). It keeps the ids
    last scored; a job still pending is scored every step, so it stays among them and counts once."""
    import scheduling.policies.fgd as fgd

    monkeypatch.setattr(fgd, "SEEN_IDS", 3)
    policy = get_policy("fgd")
    s = snap(node("n", gpus=1))
    for name in ("long", "a", "long", "b", "long", "c", "long", "d"):
        policy.score(job(name, gpus=1, share=500), s, np.ones(1, dtype=bool))
    assert len(policy._seen_ids) == 3 and "long" in policy._seen_ids
    assert policy._counted == 5 and sum(policy._seen.values()) == 5  # each of the five pods once
