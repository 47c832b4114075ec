"""The step latency promotion judges (and ``semsched bench learned``'s "churned" rows):
consecutive steps with placements, arrivals and departures between them, timed with a pair cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from inference.features.spec import FeatureSpec
from inference.model import LoadedModel, ModelConfig, Scorer
from inference.policy import LearnedPolicy
from inference.training.step_latency import LatencyProbe, consecutive_steps, measure_step_latency
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot

SPEC = FeatureSpec(gpu_models=("T4",), text_dim=8, encoder="hashed-ngram-8")


@pytest.fixture(scope="module")
def policy() -> LearnedPolicy:
    torch.manual_seed(0)
    config = ModelConfig(spec=SPEC, hidden=8, depth=2, knn=3, head_hidden=8, head_rank=2)
    return LearnedPolicy(loaded=LoadedModel(Scorer(config), config, "untrained", Path(".")))


def _nodes() -> list[NodeView]:
    return [NodeView(node_id=f"n{i}", cpu_milli=64_000, memory_mib=262_144, num_gpu=4, gpu_model="T4")
            for i in range(30)]  # fmt: skip


def _cluster() -> tuple[ClusterSnapshot, list[JobRequest]]:
    snap = ClusterSnapshot.from_nodes(_nodes())
    pods = [JobRequest(job_id=f"p{i}", cpu_milli=1000 * (1 + i % 5), memory_mib=2048, num_gpu=1,
                       per_gpu_milli=(250, 500, 1000)[i % 3], text=f"pod {i % 4}") for i in range(200)]  # fmt: skip
    return snap, pods


def test_steps_move_nodes_and_bring_new_shapes(policy: LearnedPolicy) -> None:
    snap, pods = _cluster()
    before = snap.gpu_free.copy()
    out = consecutive_steps(policy, snap, pods, pending=20, steps=6, churn=4)
    assert {len(v) for v in out.values()} == {6}
    assert {"inputs", "model", "model step", "changed nodes", "new shapes"} <= set(out)
    assert all(v > 0 for v in out["model step"])
    assert sum(out["changed nodes"]) > 0  # placements and departures happened between the steps
    assert max(out["changed nodes"]) <= 2 * 4
    np.testing.assert_array_equal(snap.gpu_free, before)  # the caller's snapshot is left alone


def test_without_churn_nothing_moves_and_no_shape_is_new(policy: LearnedPolicy) -> None:
    snap, pods = _cluster()
    out = consecutive_steps(policy, snap, pods, pending=20, steps=4, churn=0)
    assert out["changed nodes"] == [0.0] * 4
    assert out["new shapes"] == [0.0] * 4


def test_the_probe_times_consecutive_steps_and_says_so(policy: LearnedPolicy) -> None:
    snap, pods = _cluster()
    probe = LatencyProbe.build(_nodes(), pods, pending=20, load=0.3, repeat=5, churn=3)
    out = measure_step_latency(policy, probe)
    assert out["method"] == "consecutive steps, pair cache" and out["churn"] == 3 and out["pending"] == 20
    assert 0 < out["p50_ms"] <= out["p99_ms"]
    assert 0 < out["gpu_used_pct"] < 100
