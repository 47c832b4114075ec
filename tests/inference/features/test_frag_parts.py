"""FGD's pair columns computed only on the nodes where a job fits by resources are the ones
computed on every node."""

from __future__ import annotations

import numpy as np
from inference_helpers import pod_mix, small_snapshot

import inference.features.cluster as cluster
from inference.features.cluster import frag_node_columns, frag_parts_many
from inference.features.fits import shape_fits
from inference.features.spec import FeatureSpec
from inference.model.step import step_shapes
from scheduling.filters.framework import run_filters
from scheduling.gpu_select import select_gpus
from scheduling.metrics.fragmentation import Workload

FRAG = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16", cluster=True,
                   workload=FeatureSpec.workload_rows(Workload.from_jobs(pod_mix(200, seed=3))))  # fmt: skip


def test_fgd_on_the_fitting_nodes_only_gives_the_same_columns(monkeypatch):
    snap, rng = small_snapshot(200), np.random.default_rng(5)
    for pod in pod_mix(900, seed=6):  # a busy cluster: most nodes full for most shapes
        feasible = run_filters(pod, snap, explain=False).feasible_mask
        if feasible.any():
            i = int(rng.choice(np.flatnonzero(feasible)))
            snap.reserve(i, pod, select_gpus(snap, i, pod))
    snap.healthy[::17] = False
    shapes, _ = step_shapes(pod_mix(60, seed=8), FRAG)
    nodes = np.arange(snap.num_nodes)
    skipped = ~shape_fits(shapes, snap, FRAG).any(axis=0)
    assert len(nodes) > cluster.PREFILTER_FROM and 0.2 < skipped.mean() < 1.0
    cont, fits = frag_parts_many(shapes, snap, FRAG, nodes)
    monkeypatch.setattr(cluster, "PREFILTER_FROM", 10**9)  # FGD on every node
    want_cont, want_fits = frag_parts_many(shapes, snap, FRAG, nodes)
    np.testing.assert_array_equal(fits, want_fits)
    np.testing.assert_array_equal(cont[fits], want_cont[fits])
    np.testing.assert_array_equal(frag_node_columns(cont, fits), frag_node_columns(want_cont, want_fits))


def test_a_cluster_of_no_nodes_builds_its_inputs_with_fgds_columns():
    """Found by review: FGD's tie set reduced over no nodes and raised (the worker never steps such a
    cluster; a replay's or a benchmark's may)."""
    from inference.encoders import EncoderCache, get_encoder
    from inference.model.step import build_inputs
    from scheduling.snapshot import ClusterSnapshot

    inputs = build_inputs(ClusterSnapshot.from_nodes([]), pod_mix(3), 10.0, FRAG, EncoderCache(get_encoder(FRAG.encoder)))
    assert inputs.nodes.shape[0] == 0 and inputs.pairs is not None and inputs.pairs.shape[1] == 0
