"""The pair features a server computes from a request's compact node arrays (inference/serving/pairs.py):
bit for bit the client's, over consecutive requests with placements and releases between them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC

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
