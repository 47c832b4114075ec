"""The recorders' queue summary is the one the served model call sees (inference/training/queue_windows.py)."""

from __future__ import annotations

import numpy as np
import pytest

from inference.encoders import EncoderCache, HashedNgramEncoder
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.spec import FeatureSpec
from inference.training.collect import RecordingPolicy
from scheduling.assign import schedule_step
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot
from tests.inference.inference_helpers import job, small_nodes

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=8, encoder="hashed-ngram-8")


def test_a_recorded_queue_summary_is_the_mean_of_the_model_calls_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: the recorder averaged every pending job, those that fit nowhere included, where the
    served call averages its window: the first jobs of the step that fit somewhere (at most
    SEMSCHED_MODEL_WINDOW), and a job past it that reaches scoring opens the next window from it on. And it
    recorded the node state after the step's earlier placements, where the served encoder reads the call's."""
    monkeypatch.setenv("SEMSCHED_MODEL_WINDOW", "4")
    huge = [job(f"h{i}", gpus=16, submit_time=float(i), text=f"huge {i}") for i in range(3)]  # fit nowhere
    small = [job(f"s{i}", cpu=1000, mem=1024, gpus=1, per=250, submit_time=3.0 + i, text=f"small {i}")
             for i in range(10)]  # fmt: skip
    encoder = EncoderCache(HashedNgramEncoder(8))
    rec = RecordingPolicy(get_policy("best-fit"), SPEC, encoder, rate=1.0, seed=0, all_ties=True)
    result = schedule_step(ClusterSnapshot.from_nodes(small_nodes(4)), [*huge, *small], rec, now=100.0)
    assert len(result.placements) == 10  # every small job, none of the huge ones
    rows = job_demand(small, 100.0, SPEC, encoder)
    windows = [range(0, 4), range(4, 8), range(8, 10)]  # 14 GPUs: every small job fits at every point
    want = {i: rows[list(w)].mean(axis=0) for w in windows for i in w}
    d = rec.demos
    assert len(d.jobs) >= 8
    opened: dict[int, np.ndarray] = {}  # window -> the node state it opened on
    for own, queue, nodes in zip(d.jobs, d.queues, d.nodes, strict=True):
        [i] = [k for k in range(len(small)) if np.array_equal(rows[k], own)]
        np.testing.assert_allclose(queue, want[i], atol=1e-6)
        # the node state is the call's, as the window opened: in-step re-scoring moves only the pair features
        np.testing.assert_array_equal(nodes, opened.setdefault(i // 4, nodes))
    np.testing.assert_array_equal(opened[0], node_state(ClusterSnapshot.from_nodes(small_nodes(4)), SPEC))
    assert not np.array_equal(opened[0], opened[1])  # the second window opened after four placements
    everything = job_demand([*huge, *small], 100.0, SPEC, encoder).mean(axis=0)
    assert not np.allclose(d.queues[0], everything, atol=1e-3)  # (what was recorded before)
