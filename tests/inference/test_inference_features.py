import numpy as np
import pytest
from inference_helpers import job, pod_mix, small_snapshot

from inference.encoders import EncoderCache, HashedNgramEncoder
from inference.features import (
    JOB_BASE,
    NODE_BASE,
    PAIR,
    FeatureSpec,
    build_topology,
    featurise_step,
    job_demand,
    node_state,
    pair_features,
)
from inference.features.topology import knn
from scheduling.filters.framework import run_filters
from scheduling.gpu_select import select_gpus
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot

SPEC = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16")


def col(name: str, names=None) -> int:
    return (names or SPEC.node_names).index(name)


def test_dimensions_in_one_place():
    assert SPEC.node_dim == len(NODE_BASE) + 3  # A10, T4, other
    assert SPEC.job_dim == len(JOB_BASE) + 5 + 16
    assert SPEC.pair_dim == len(PAIR)
    assert FeatureSpec(utilisation=True).node_dim == FeatureSpec().node_dim + 1
    assert FeatureSpec.from_json(SPEC.to_json()) == SPEC


def test_node_state_known_values():
    snap = small_snapshot(4)  # A10×8 (64 cores), T4×4, V100×2, CPU-only
    snap.reserve(0, job("a", cpu=16_000, mem=65_536, gpus=1, per=500), [3])
    snap.reserve(0, job("b", cpu=16_000, gpus=2, per=1000), [0, 1])
    snap.set_healthy(2, False)
    x = node_state(snap, SPEC)
    assert x.shape == (4, SPEC.node_dim) and x.dtype == np.float32 and not np.isnan(x).any()
    a10 = x[0]
    assert a10[col("cpu_cap")] == pytest.approx(64 / 128)
    assert a10[col("cpu_free_frac")] == pytest.approx(0.5)
    assert a10[col("gpu_free_frac")] == pytest.approx(5.5 / 8)
    assert a10[col("gpu_full_free_frac")] == pytest.approx(5 / 8)
    assert a10[col("gpu_partial_frac")] == pytest.approx(1 / 8)
    assert a10[col("gpu_max_free")] == pytest.approx(1.0)
    assert a10[col("cpu_per_free_gpu")] == pytest.approx((32 / 16) / 5.5)
    assert a10[col("model=A10")] == 1 and a10[col("model=T4")] == 0 and a10[col("model=other")] == 0
    assert x[2, col("model=other")] == 1 and x[2, col("healthy")] == 0  # V100 is not in the vocabulary
    cpu_only = x[3]
    assert cpu_only[col("has_gpu")] == 0 and cpu_only[col("gpu_free_frac")] == 0
    assert cpu_only[[col("model=A10"), col("model=T4"), col("model=other")]].sum() == 0


def test_job_demand_known_values():
    enc = EncoderCache(HashedNgramEncoder(16))
    jobs = [job("s", cpu=6000, gpus=1, per=460, qos="LS", submit_time=10.0, text="x | pod_phase=Running"),
            job("w", cpu=0, gpus=0, per=0, qos="weird", priority=5, runtime_estimate_s=100.0)]  # fmt: skip
    q = job_demand(jobs, now=20.0, spec=SPEC, encoder=enc)
    names = SPEC.job_names
    assert q.shape == (2, SPEC.job_dim) and q.dtype == np.float32 and not np.isnan(q).any()
    assert q[0, names.index("per_gpu")] == pytest.approx(0.46)
    assert q[0, names.index("sharing")] == 1 and q[1, names.index("cpu_only")] == 1
    assert q[0, names.index("log_waited")] == pytest.approx(np.log1p(10) / 10)
    assert q[0, names.index("has_duration")] == 0 and q[1, names.index("log_duration")] == pytest.approx(np.log1p(100) / 15)
    assert q[0, names.index("qos=LS")] == 1 and q[1, names.index("qos=other")] == 1
    text = q[:, names.index("text0"):]
    assert np.linalg.norm(text[0]) == pytest.approx(1.0) and not text[1].any()  # no text: the zero vector
    np.testing.assert_array_equal(text[0], enc.encode(["x"])[0])  # outcome label stripped


def _after_stats(snap: ClusterSnapshot, i: int, j) -> tuple[int, int, int, int]:
    """Brute force: reserve on a copy the way the policy will, then read the node's state."""
    c = snap.copy()
    c.reserve(i, j, select_gpus(c, i, j))
    row = c.gpu_free[i, : c.num_gpu[i]]
    return int(c.gpu_full_free[i]), int(max(c.gpu_max_free[i], 0)), int(((row > 0) & (row < 1000)).sum()), int(c.cpu_free[i])


def test_pair_features_match_a_real_reservation():
    snap = small_snapshot(12)
    rng = np.random.default_rng(3)
    for k, p in enumerate(pod_mix(60, seed=1)):  # random partial state
        feasible = run_filters(p, snap, explain=False).feasible_mask
        if feasible.any():
            i = int(rng.choice(np.flatnonzero(feasible)))
            snap.reserve(i, p, select_gpus(snap, i, p))
        if k % 3:
            continue
        for probe in (job("s", gpus=1, per=300), job("w", gpus=2, per=1000), job("c", gpus=0, per=0, cpu=2000)):
            x = pair_features(probe, snap, SPEC)
            assert x.shape == (12, len(PAIR)) and x.dtype == np.float32 and not np.isnan(x).any()
            ok = run_filters(probe, snap, explain=False).feasible_mask
            for i in np.flatnonzero(ok):
                full, mx, partial, cpu = _after_stats(snap, i, probe)
                ng = snap.num_gpu[i]
                assert x[i, PAIR.index("full_free_after_frac")] == pytest.approx(full / ng if ng else 0)
                assert x[i, PAIR.index("max_free_after")] == pytest.approx(mx / 1000)
                assert x[i, PAIR.index("partial_after_frac")] == pytest.approx(partial / ng if ng else 0)
                assert x[i, PAIR.index("cpu_left_frac")] == pytest.approx(cpu / snap.cpu_cap[i])


def test_topology_knn_and_labels():
    snap = small_snapshot(8)
    topo = build_topology(snap, SPEC, k=2)
    assert topo.kind == "knn" and topo.neighbours.shape == (8, 2)
    assert (topo.neighbours != np.arange(8)[:, None]).all()
    # node 0 (A10) is identical to node 4: its nearest neighbour
    assert topo.neighbours[0, 0] == 4 and topo.neighbours[4, 0] == 0
    assert knn(np.zeros((1, 3)), 4).shape == (1, 1)
    racks = [NodeView(node_id=f"r{i}", cpu_milli=1000, memory_mib=1000, topology={"rack": f"rack{i // 3}"} if i < 6 else {})
             for i in range(7)]  # fmt: skip
    t = build_topology(ClusterSnapshot.from_nodes(racks), SPEC)
    assert t.kind == "labels"
    g = t.groups
    assert g[0] == g[1] == g[2] != g[3] == g[4] == g[5] and g[6] not in g[:6]


def test_featurise_step_uses_the_filters_mask():
    snap = small_snapshot(12)
    snap.set_healthy(0, False)
    jobs = [job("big", gpus=8, per=1000), job("t4", gpus=1, per=1000, gpu_models=frozenset({"T4"})), job("c", gpus=0, per=0)]
    f = featurise_step(snap, jobs, 0.0, SPEC, EncoderCache(HashedNgramEncoder(16)))
    assert f.nodes.shape == (12, SPEC.node_dim) and f.jobs.shape == (3, SPEC.job_dim) and f.feasible.dtype == bool
    for r, j in enumerate(jobs):
        np.testing.assert_array_equal(f.feasible[r], run_filters(j, snap, explain=False).feasible_mask)
    assert list(np.flatnonzero(f.feasible[0])) == [4, 8]  # A10 nodes, node 0 unhealthy
    assert set(np.flatnonzero(f.feasible[1])) == {1, 5, 9}


# -- the optional cluster and fragmentation columns -------------------------------------------------------------
def extended_spec(pods=None) -> FeatureSpec:
    from scheduling.metrics.fragmentation import Workload

    workload = Workload.from_jobs(pods if pods is not None else pod_mix(200, seed=3))
    return FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16", cluster=True,
                       workload=FeatureSpec.workload_rows(workload))  # fmt: skip


def test_extended_spec_round_trips_and_old_json_means_the_base_layout():
    spec = extended_spec()
    assert FeatureSpec.from_json(spec.to_json()) == spec
    from inference.features.spec import CLUSTER, CLUSTER_PAIR, FRAG_NODE, FRAG_PAIR

    assert spec.node_dim == SPEC.node_dim + len(CLUSTER) + len(FRAG_NODE)
    assert spec.pair_dim == len(PAIR) + len(CLUSTER_PAIR) + len(FRAG_PAIR)
    old = {k: v for k, v in SPEC.to_json().items() if k not in ("cluster", "workload")}  # a config.json from before
    assert FeatureSpec.from_json(old) == SPEC and SPEC.pair_dim == len(PAIR)


def test_cluster_features_known_values():
    spec = extended_spec()
    snap = small_snapshot(8)  # A10, T4, V100, CPU, A10, T4, V100, CPU
    snap.reserve(0, job("a", gpus=1, per=500), [0])
    x = node_state(snap, spec)
    names = spec.node_names
    assert x.shape == (8, spec.node_dim) and not np.isnan(x).any()
    assert x[:, col("priority", names)].tolist() == pytest.approx([i / 7 for i in range(8)])
    assert x[4, col("model_empty_share", names)] == pytest.approx(0.5)  # one of the two A10 nodes is used
    assert x[1, col("model_empty_share", names)] == pytest.approx(1.0)
    assert x[0, col("model_gpu_free_share", names)] == pytest.approx(15.5 / 16)
    assert x[:, col("cluster_gpu_used", names)] == pytest.approx(np.full(8, 0.5 / 28))
    assert x[:, col("cluster_empty_big_share", names)] == pytest.approx(np.full(8, 0.5))  # 8-GPU nodes: 1 of 2
    assert x[0, col("frag_frac", names)] > 0 and x[4, col("frag_frac", names)] >= 0


def test_fgd_pick_feature_is_what_fgd_chooses():
    """``fgd_first`` marks the node place_one takes under FGD; ``fgd_best`` its tie set."""
    from scheduling.assign import place_one
    from scheduling.policies.fgd import FGD

    pods = pod_mix(80, seed=1)
    spec = extended_spec(pods)
    from inference.features.cluster import workload_of

    fgd = FGD(workload_of(spec.workload))
    snap = small_snapshot(16)
    names = spec.pair_names
    checked = 0
    for p in pods:
        x = pair_features(p, snap, spec)
        assert x.shape == (16, spec.pair_dim)
        feasible = run_filters(p, snap, explain=False).feasible_mask
        scores = fgd.score(p, snap, feasible)
        outcome = place_one(snap, p, fgd, top_k=0)
        if not feasible.any():
            continue
        first = x[:, names.index("fgd_first")]
        assert first.sum() == 1 and snap.node_ids[int(np.argmax(first))] == outcome.node_id
        best = scores == scores[feasible].max()
        assert (x[:, names.index("fgd_best")].astype(bool) == (best & feasible)).all()
        checked += 1
    assert checked > 40


def test_pair_features_of_many_jobs_equal_each_jobs():
    """The step computes pair features for all its shapes at once: row j must be job j's own,
    for sharing, whole-GPU and CPU-only pods mixed, on a partly used cluster."""
    from inference.features.pairs import pair_features_many

    spec = extended_spec()
    snap = small_snapshot(12)
    rng = np.random.default_rng(5)
    for p in pod_mix(40, seed=2):
        feasible = run_filters(p, snap, explain=False).feasible_mask
        if feasible.any():
            i = int(rng.choice(np.flatnonzero(feasible)))
            snap.reserve(i, p, select_gpus(snap, i, p))
    probes = [*pod_mix(30, seed=9), job("s", gpus=1, per=300), job("w", gpus=2, per=1000),
              job("c", gpus=0, per=0, cpu=2000), job("x", gpus=1, per=1000)]  # fmt: skip
    assert {p.num_gpu == 1 and p.per_gpu_milli < 1000 for p in probes} == {True, False}
    for s in (SPEC, spec):
        many = pair_features_many(probes, snap, s)
        assert many.shape == (len(probes), 12, s.pair_dim) and many.dtype == np.float32
        for row, p in zip(many, probes, strict=True):
            np.testing.assert_array_equal(row, pair_features(p, snap, s))
    assert pair_features_many([], snap, SPEC).shape == (0, 12, len(PAIR))
    some = np.array([11, 0, 5])  # in-step re-scoring: only the nodes earlier placements changed
    for s in (SPEC, spec):
        np.testing.assert_array_equal(pair_features_many(probes, snap, s, some), pair_features_many(probes, snap, s)[:, some])


def test_pair_features_follow_the_spec_they_are_given():
    spec = extended_spec()
    snap = small_snapshot(8)
    assert pair_features(job(), snap, spec).shape == (8, spec.pair_dim)
    assert pair_features(job(), snap, SPEC).shape == (8, len(PAIR))


def test_cluster_and_frag_features_are_vectorised():
    """No Python loop per node: after the per-table caches are built, featurising a 3,000-node
    cluster makes exactly as many Python and C calls as a 30-node one."""
    import sys

    spec = extended_spec()
    pod = pod_mix(1)[0]
    counts = []
    for n in (30, 3000):
        snap = small_snapshot(n)
        node_state(snap, spec), pair_features(pod, snap, spec)  # builds the static caches of this table
        calls = [0]

        def count(frame, event, arg, calls=calls):
            if event in ("call", "c_call"):
                calls[0] += 1

        sys.setprofile(count)
        try:
            node_state(snap, spec)
            pair_features(pod, snap, spec)
        finally:
            sys.setprofile(None)
        counts.append(calls[0])
    assert counts[0] == counts[1], counts
