"""The pair features a server computes from a request's compact node arrays (inference/serving/pairs.py):
bit for bit the client's, over consecutive requests with placements and releases between them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from inference_helpers import job, pod_mix, small_snapshot
from serving_helpers import FRAG_SPEC, SPEC

from inference.features.node_arrays import NodeArrays
from inference.features.pairs import pair_features_many, pair_shape
from inference.serving.pairs import ServedPairs
from scheduling.gpu_select import select_gpus


def distinct(jobs, spec):
    seen = {}
    for j in jobs:
        seen.setdefault(pair_shape(j, spec), j)
    return list(seen.values())


def test_served_pairs_equal_the_clients_over_placements_and_releases():
    served = ServedPairs()
    for spec in (SPEC, replace(SPEC, cluster=True)):
        snap = small_snapshot(16)
        pods = pod_mix(60, seed=4)
        held = []
        for step in range(6):
            jobs = distinct(pods[step * 8:step * 8 + 20], spec)
            got = served(NodeArrays.of(snap, jobs), spec)
            np.testing.assert_array_equal(got, pair_features_many(jobs, snap, spec))
            for j in pods[step * 8:step * 8 + 3]:  # placements on the first node each fits, then a release
                for i in np.flatnonzero((snap.cpu_free >= j.cpu_milli) & (snap.mem_free >= j.memory_mib)):
                    gpus = select_gpus(snap, int(i), j)
                    if gpus is not None:
                        snap.reserve(int(i), j, gpus)
                        held.append((int(i), j, gpus))
                        break
            if held and step % 2:
                snap.free(*held.pop(0))
    # one table (and pair cache) per distinct capacity content: the same cluster again reuses it
    assert len(served) == 1
    (table, cache), = served._entries.values()
    assert cache.stats.shapes_hit > 0 and cache.stats.nodes_recomputed < cache.stats.calls * 16 * 7


def test_a_second_cluster_gets_its_own_table_and_the_oldest_is_dropped():
    served = ServedPairs(tables=2)
    jobs = distinct(pod_mix(10), SPEC)
    for n in (8, 12, 16, 12):
        snap = small_snapshot(n)
        np.testing.assert_array_equal(served(NodeArrays.of(snap, jobs), SPEC), pair_features_many(jobs, snap, SPEC))
    assert len(served) == 2 and sorted(len(t.cpu_cap) for t, _ in served._entries.values()) == [12, 16]


def test_with_fgd_columns_the_served_pairs_equal_the_clients_bit_for_bit():
    """FGD's columns read the nodes' GPU models and health, the shapes' accepted models (one the
    cluster does not have, too) and the whole cluster's tie set: all from the compact arrays."""
    served = ServedPairs()
    snap = small_snapshot(16)
    pods = [*pod_mix(60, seed=6), job("t4", gpus=1, per=250, gpu_models=frozenset({"T4"})),
            job("a10-or-t4", gpus=2, per=1000, gpu_models=frozenset({"A10", "T4"})),
            job("h100", gpus=1, per=1000, gpu_models=frozenset({"H100"}))]  # fmt: skip
    for step in range(6):
        jobs = distinct([*pods[step * 8:step * 8 + 20], *pods[-3:]], FRAG_SPEC)
        source = NodeArrays.of(snap, jobs, fgd=True)
        assert "H100" in source.model_names and source.shape_keys()[-1][4] == frozenset({"H100"})
        np.testing.assert_array_equal(served(source, FRAG_SPEC), pair_features_many(jobs, snap, FRAG_SPEC))
        back = NodeArrays.from_arrays(source.arrays())  # what the wire gives the server
        np.testing.assert_array_equal(back.healthy, snap.healthy)
        assert back.model_names == source.model_names and back.shape_keys() == source.shape_keys()
        for j in pods[step * 8:step * 8 + 4]:
            i = int(np.flatnonzero((snap.cpu_free >= j.cpu_milli) & (snap.mem_free >= j.memory_mib))[step % 2])
            if (gpus := select_gpus(snap, i, j)) is not None:
                snap.reserve(i, j, gpus)
        snap.set_healthy(step, step % 2 == 1)
    assert len(served) == 1
