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
from tests.inference.inference_helpers import job, pod_mix, small_nodes

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


GANG_ROLLBACK = [  # the gang G cannot fit whole (g3 wants a GPU model no node has): its placements are rolled back
    job("g1", cpu=2000, mem=4096, gpus=8, per=1000, gang_id="G", gang_size=3, submit_time=0.0),
    job("x", cpu=1000, mem=1024, gpus=0, per=0, submit_time=1.0),
    job("g2", cpu=1000, mem=1024, gpus=1, per=1000, gang_id="G", gang_size=3, submit_time=2.0),
    job("g3", cpu=1000, mem=1024, gpus=1, per=1000, gang_id="G", gang_size=3, gpu_models=frozenset({"H100"}),
        submit_time=4.0),
    job("s1", cpu=2000, mem=4096, gpus=8, per=1000, submit_time=5.0),
    job("s2", cpu=2000, mem=4096, gpus=8, per=1000, submit_time=6.0),
    job("y", cpu=1000, mem=1024, gpus=0, per=0, submit_time=7.0),
]  # fmt: skip


@pytest.mark.parametrize(("jobs", "window", "nodes"), [
    (pod_mix(60, seed=1), 4, 6), (pod_mix(40, seed=2), 1, 6), (pod_mix(60, seed=1), 0, 6), (GANG_ROLLBACK, 2, 4),
], ids=["window-4", "window-1", "whole-queue", "gang-rolled-back"])  # fmt: skip
def test_the_recorded_states_are_the_served_model_calls(jobs, window, nodes, tmp_path, monkeypatch) -> None:
    """The recorder beside the learned policy itself, acting (DAgger's setting): every recorded state's queue
    summary and node state are those of the model call the policy scored the job from. Found by review (the
    gang case): a rolled-back placement reset the policy's "fits nowhere" answers, not the recorder's."""
    import torch

    import inference  # noqa: F401  (registers "learned")
    from inference.model import ModelConfig, Scorer, load_model, save_model
    from inference.policy import LearnedPolicy

    monkeypatch.setenv("SEMSCHED_MODEL_WINDOW", str(window))
    torch.manual_seed(3)
    spec = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")
    loaded = load_model(save_model(tmp_path / "m", Scorer(ModelConfig(spec=spec, hidden=8, depth=2)), "w1"))
    learned = LearnedPolicy(loaded=loaded, window=window)  # on its own, as the worker runs it
    alone = schedule_step(ClusterSnapshot.from_nodes(small_nodes(nodes)), jobs, learned, now=100.0)
    rec = RecordingPolicy(get_policy("best-fit"), spec, learned.encoder(), rate=1.0, seed=0, all_ties=True,
                          actor=LearnedPolicy(loaded=loaded, window=window))  # fmt: skip
    recorded = schedule_step(ClusterSnapshot.from_nodes(small_nodes(nodes)), jobs, rec, now=100.0)
    assert [(p.job_id, p.node_id) for p in recorded.placements] == [(p.job_id, p.node_id) for p in alone.placements]
    rows = job_demand(jobs, 100.0, spec, learned.encoder())
    d = rec.demos
    assert len(d.jobs) >= 3
    for own, queue, node_rows in zip(d.jobs, d.queues, d.nodes, strict=True):
        [k] = [k for k in range(len(jobs)) if np.array_equal(rows[k], own)]
        call = learned._windows.scored_by[jobs[k].job_id]  # the call its scores came from
        np.testing.assert_allclose(queue, call.inputs.queue, atol=1e-6, err_msg=jobs[k].job_id)
        np.testing.assert_array_equal(node_rows, call.inputs.nodes, err_msg=jobs[k].job_id)
