"""The transition model's target is the whole state after the placement (inference/training/next_state.py):
the chosen node's row and the columns every node carries about its GPU model and the cluster. Found by
review: only the chosen row was replaced, a state that cannot occur."""

from __future__ import annotations

import numpy as np
import torch
from inference_helpers import pod_mix, small_snapshot

from inference.features.cluster import model_groups
from inference.features.nodes import node_state
from inference.features.spec import FeatureSpec
from inference.training.next_state import next_states
from scheduling.filters.framework import run_filters
from scheduling.gpu_select import select_gpus
from scheduling.metrics.fragmentation import Workload

WORKLOAD = FeatureSpec.workload_rows(Workload.from_jobs(pod_mix(200, seed=3)))


def test_the_next_state_is_the_featurised_cluster_after_the_placement():
    for spec in (FeatureSpec(gpu_models=("A10", "T4"), cluster=True, workload=WORKLOAD),
                 FeatureSpec(gpu_models=("A10",), cluster=True, utilisation=True), FeatureSpec()):  # fmt: skip
        snap, rng = small_snapshot(120), np.random.default_rng(5)
        util = rng.random(snap.num_nodes)
        befores, choices, rows, wants = [], [], [], []
        for pod in pod_mix(40, seed=6):
            feasible = run_filters(pod, snap, explain=False).feasible_mask
            if not feasible.any():
                continue
            i = int(rng.choice(np.flatnonzero(feasible)))
            befores.append(node_state(snap, spec, util))
            snap.reserve(i, pod, select_gpus(snap, i, pod))
            wants.append(node_state(snap, spec, util))
            choices.append(i)
            rows.append(node_state(snap, spec)[i])  # as recorded: without the utilisation window
        got = next_states(torch.from_numpy(np.stack(befores)), torch.tensor(choices),
                          torch.from_numpy(np.stack(rows)), model_groups(snap), spec)  # fmt: skip
        assert len(choices) > 20
        np.testing.assert_allclose(got.numpy(), np.stack(wants), rtol=0, atol=1e-6)
        if spec.cluster:  # not the chosen row alone: the other rows' shared columns moved too
            moved = (np.stack(wants) != np.stack(befores)).any(axis=2).sum(axis=1)
            assert moved.mean() > 10


def test_a_state_recorded_when_its_window_opened_moves_by_its_own_placement_alone():
    """The archive records a decision's state as the step's model call saw it (queue_windows), before the
    step's earlier placements; its recorded rows before and after hold them. Found by review: the cluster
    columns took those placements in, and their nodes' rows did not."""
    spec = FeatureSpec(gpu_models=("A10", "T4"), cluster=True, workload=WORKLOAD)
    snap, rng = small_snapshot(120), np.random.default_rng(9)
    windows, choices, prevs, rows, wants = [], [], [], [], []
    pods = [p for p in pod_mix(60, seed=4) if p.num_gpu]
    for first, second in zip(pods[::2], pods[1::2], strict=False):
        window = node_state(snap, spec)
        for pod in (first, second):  # the step places two jobs; the second's state is the window's
            feasible = run_filters(pod, snap, explain=False).feasible_mask
            i = int(rng.choice(np.flatnonzero(feasible)))
            mid = node_state(snap, spec)
            snap.reserve(i, pod, select_gpus(snap, i, pod))
        after = node_state(snap, spec)
        windows.append(window)
        choices.append(i)
        prevs.append(mid[i])
        rows.append(after[i])
        wants.append(window + (after - mid))  # the window's state, moved by the second placement alone
    got = next_states(torch.from_numpy(np.stack(windows)), torch.tensor(choices), torch.from_numpy(np.stack(rows)),
                      model_groups(snap), spec, torch.from_numpy(np.stack(prevs)))  # fmt: skip
    assert len(choices) > 10
    np.testing.assert_allclose(got.numpy(), np.stack(wants), rtol=0, atol=1e-5)
