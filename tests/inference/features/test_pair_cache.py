"""The pair cache returns, step after step, exactly what computing the pair features afresh
returns, while recomputing only the nodes that changed."""

from __future__ import annotations

import numpy as np
import pytest
from inference_helpers import job, pod_mix, small_snapshot

from inference.features.cluster import PREFILTER_FROM
from inference.features.fits import shape_fits
from inference.features.pair_cache import PairCache
from inference.features.pairs import pair_features_many
from inference.features.spec import FeatureSpec
from scheduling.filters.framework import run_filters
from scheduling.gpu_select import select_gpus
from scheduling.metrics.fragmentation import Workload
from scheduling.snapshot import ClusterSnapshot

LEAN = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16")
FRAG = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16", cluster=True,
                   workload=FeatureSpec.workload_rows(Workload.from_jobs(pod_mix(200, seed=3))))  # fmt: skip


def _steps(snap: ClusterSnapshot, seed: int, steps: int = 25):
    """Steps of a little scheduler: each places a few pods, releases some, flips a node's health,
    then asks for a varying set of shapes (old ones, and now and then new ones)."""
    rng = np.random.default_rng(seed)
    pool = [*pod_mix(60, seed=seed), job("m", gpus=1, per=1000, gpu_models=frozenset({"T4"})),
            job("s3", gpus=1, per=300), job("w2", gpus=2, per=1000)]  # fmt: skip
    placed: list[tuple[int, object, tuple[int, ...]]] = []
    for step in range(steps):
        for p in rng.choice(len(pool), size=int(rng.integers(0, 4)), replace=False):
            pod = pool[int(p)]
            feasible = run_filters(pod, snap, explain=False).feasible_mask
            if feasible.any():
                i = int(rng.choice(np.flatnonzero(feasible)))
                gpus = select_gpus(snap, i, pod)
                snap.reserve(i, pod, gpus)
                placed.append((i, pod, gpus))
        if placed and rng.random() < 0.5:
            i, pod, gpus = placed.pop(int(rng.integers(len(placed))))
            snap.free(i, pod, gpus)
        if step % 7 == 3:
            k = int(rng.integers(snap.num_nodes))
            snap.set_healthy(k, not bool(snap.healthy[k]))
        yield [pool[int(i)] for i in rng.choice(len(pool), size=int(rng.integers(1, 12)), replace=False)]


@pytest.mark.parametrize("nodes", [16, PREFILTER_FROM + 32])  # the second: FGD only where a shape fits
def test_cached_pairs_equal_fresh_ones_over_many_steps(nodes):
    for spec in (LEAN, FRAG):
        snap = small_snapshot(nodes)
        cache = PairCache(max_shapes=6)  # small: shapes are evicted and come back
        for jobs in _steps(snap, seed=1):
            rows, room = cache.pairs_and_room(jobs, snap, spec)
            np.testing.assert_array_equal(rows, pair_features_many(jobs, snap, spec))
            np.testing.assert_array_equal(room, shape_fits(jobs, snap, spec))
        assert cache.stats.shapes_hit > 0 and cache.stats.shapes_new > 0
        assert len(cache) <= 6 + 12


def test_only_changed_nodes_are_recomputed():
    snap = small_snapshot(16)
    cache = PairCache()
    jobs = pod_mix(20, seed=4)
    cache.pairs(jobs, snap, LEAN)
    shapes = cache.stats.shapes_new
    before = cache.stats.nodes_recomputed
    assert before == shapes * 16
    cache.pairs(jobs, snap, LEAN)  # nothing changed
    assert cache.stats.nodes_recomputed == before
    pod = jobs[0]
    i = int(np.flatnonzero(run_filters(pod, snap, explain=False).feasible_mask)[0])
    snap.reserve(i, pod, select_gpus(snap, i, pod))
    out = cache.pairs(jobs, snap, LEAN)
    assert cache.stats.nodes_recomputed == before + shapes  # one node, every shape
    np.testing.assert_array_equal(out, pair_features_many(jobs, snap, LEAN))


def test_a_shape_not_asked_for_catches_up_on_everything_it_missed():
    snap = small_snapshot(16)
    cache = PairCache()
    a, b = job("a", gpus=1, per=500), job("b", gpus=2, per=1000)
    cache.pairs([a, b], snap, LEAN)
    for k in range(3):  # three steps that ask for `a` only, each changing another node
        pod = job(f"x{k}", gpus=1, per=1000)
        i = int(np.flatnonzero(run_filters(pod, snap, explain=False).feasible_mask)[k])
        snap.reserve(i, pod, select_gpus(snap, i, pod))
        cache.pairs([a], snap, LEAN)
    np.testing.assert_array_equal(cache.pairs([b], snap, LEAN), pair_features_many([b], snap, LEAN))


def test_a_new_node_table_or_spec_starts_over():
    cache = PairCache()
    jobs = pod_mix(10, seed=5)
    cache.pairs(jobs, small_snapshot(16), LEAN)
    other = small_snapshot(12)  # nodes left: another table
    np.testing.assert_array_equal(cache.pairs(jobs, other, LEAN), pair_features_many(jobs, other, LEAN))
    np.testing.assert_array_equal(cache.pairs(jobs, other, FRAG), pair_features_many(jobs, other, FRAG))


def test_gpu_models_make_a_shape_only_where_the_features_see_them():
    from inference.features.pairs import pair_shape

    t4, anywhere = job("t4", gpu_models=frozenset({"T4"})), job("any")
    assert pair_shape(t4, LEAN) == pair_shape(anywhere, LEAN)  # the base columns ignore them
    assert pair_shape(t4, FRAG) != pair_shape(anywhere, FRAG)  # FGD's "fits" does not
    snap = small_snapshot(16)
    both = PairCache().pairs([t4, anywhere], snap, FRAG)
    assert not np.array_equal(both[0], both[1])


def test_each_update_is_bounded_by_frag_chunk(monkeypatch):
    """FGD's arrays grow with the (shape, node) pairs of one call: new shapes on every node are
    taken about FRAG_CHUNK pairs at a time, as the shapes that missed a few nodes are."""
    import inference.features.pair_cache as pc

    monkeypatch.setattr(pc, "FRAG_CHUNK", 3 * 40)
    sizes: list[int] = []
    update = PairCache._update_group

    def spy(self, jobs, slots, nodes, snapshot, spec):  # type: ignore[no-untyped-def]
        sizes.append(len(slots) * len(nodes))
        return update(self, jobs, slots, nodes, snapshot, spec)

    monkeypatch.setattr(PairCache, "_update_group", spy)
    snap = small_snapshot(40)
    jobs = pod_mix(60, seed=5)  # many shapes, all new: dirty on every node
    rows, _ = PairCache().pairs_and_room(jobs, snap, FRAG)
    np.testing.assert_array_equal(rows, pair_features_many(jobs, snap, FRAG))
    assert len(sizes) > 1 and max(sizes) <= 3 * 40, sizes
