"""The ``predictor`` model: durations from feature rows equal the duration predictor's own answers;
the transition is T applied k times, and absent (an error, never invented) without a transition head."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from inference_helpers import pod_mix
from serving_helpers import SPEC, publish

from inference.duration.features import SHAPE_DIM
from inference.model import ModelConfig, Scorer
from inference.serving.host import ModelHost
from inference.serving.predictor import PredictorModel, duration_seconds, rollout


@pytest.fixture(scope="module")
def duration_dir(tmp_path_factory):
    from inference.duration.config import DurationConfig
    from inference.duration.io import save_predictor
    from inference.duration.train import train_predictor

    jobs = pod_mix(80, seed=3)
    durations = [30.0 * (1 + j.num_gpu) * (1 + i % 5) for i, j in enumerate(jobs)]
    config = DurationConfig(version="d1", encoder="hashed-ngram-16", text_dim=16, hidden=16, epochs=3)
    predictor = train_predictor(jobs, durations, config, tune=False)
    return save_predictor(tmp_path_factory.mktemp("duration") / "d1", predictor)


@pytest.mark.parametrize("mode", ["blend", "regression", "retrieval"])
def test_duration_from_feature_rows_equals_predict_many(duration_dir, mode):
    """With a tuned model's validation shift and per-key history (found by review: this test's model had
    neither, and the served answer left both out: 0.5-2.1x off the model's own). Rows name no job, so
    the served blend is the two-way one; the history is in the worker's own answers only."""
    from inference.duration.io import load_predictor

    predictor = load_predictor(duration_dir)
    predictor.config = dataclasses.replace(predictor.config, mode=mode, regression_shift=-0.12, history_weight=0.25,
                                           history_min_count=1)  # fmt: skip
    seen = pod_mix(30, seed=4)
    predictor.observe_many(seen, [20.0 * (1 + i % 7) for i in range(len(seen))])  # keys with a history
    jobs = pod_mix(15, seed=9) + seen[:5]
    text, shape, _ = predictor.features(jobs)
    want = predictor.predict_many(jobs, mode="pair" if mode == "blend" else mode)
    np.testing.assert_allclose(duration_seconds(predictor, text, shape), want, rtol=1e-6)
    if mode == "blend":  # (the worker's own blend does use the history)
        assert not np.allclose(predictor.predict_many(jobs), want, rtol=1e-6)


def test_predictor_model_serves_the_duration_model_and_says_which(tmp_path, duration_dir):
    from inference.duration.io import load_predictor

    publish(tmp_path, "v1", seed=0)
    model = PredictorModel(ModelHost(tmp_path / "latest"), duration_dir)
    predictor = load_predictor(duration_dir)
    jobs = pod_mix(5, seed=1)
    text, shape, _ = predictor.features(jobs)
    (answer,) = model([{"TEXT_VEC": text, "SHAPE": shape}])
    np.testing.assert_allclose(answer["DURATION_S"][:, 0], predictor.predict_many(jobs), rtol=1e-5)
    assert answer["SOURCE"][0, 0] == b"duration blend d1" and answer["VERSION"][0, 0] == b"v1"
    assert "duration blend d1" in model.describe()


def test_without_a_duration_model_the_answer_is_nan_and_says_absent(tmp_path):
    publish(tmp_path, "v1", seed=0)
    model = PredictorModel(ModelHost(tmp_path / "latest"))
    (answer,) = model([{"TEXT_VEC": np.zeros((2, 16), np.float32), "SHAPE": np.zeros((2, SHAPE_DIM), np.float32)}])
    assert np.isnan(answer["DURATION_S"]).all()
    assert answer["SOURCE"][0, 0].startswith(b"absent:")


def test_a_duration_model_published_after_the_start_is_served(tmp_path, duration_dir):
    """Found by review: ``models/duration/latest`` was looked for only when the stub started."""
    import shutil

    from inference.duration.io import point_latest

    publish(tmp_path, "v1", seed=0)
    model = PredictorModel(ModelHost(tmp_path / "latest"), watch_s=0.0)
    request = {"TEXT_VEC": np.zeros((2, 16), np.float32), "SHAPE": np.zeros((2, SHAPE_DIM), np.float32)}
    assert model([request])[0]["SOURCE"][0, 0].startswith(b"absent:")
    shutil.copytree(duration_dir, tmp_path / "duration" / "d1")
    point_latest(tmp_path / "duration", "d1")
    (answer,) = model([request])
    assert answer["SOURCE"][0, 0] == b"duration blend d1" and np.isfinite(answer["DURATION_S"]).all()


def test_a_broken_duration_version_is_not_loaded_again_at_every_check(tmp_path, duration_dir, monkeypatch):
    """Found by review: every ``watch_s`` a request loaded the broken version again (the error logged once)."""
    import shutil

    import inference.duration.io as duration_io
    from inference.duration.io import point_latest

    publish(tmp_path, "v1", seed=0)
    shutil.copytree(duration_dir, tmp_path / "duration" / "d1")
    point_latest(tmp_path / "duration", "d1")
    model = PredictorModel(ModelHost(tmp_path / "latest"), watch_s=0.0)
    (tmp_path / "duration" / "d2").mkdir()
    (tmp_path / "duration" / "d2" / "config.json").write_text("{")  # written in part
    point_latest(tmp_path / "duration", "d2")
    loads, real = [], duration_io.load_predictor
    monkeypatch.setattr(duration_io, "load_predictor", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    for _ in range(3):
        assert model.duration.current().version == "d1"  # the one that loaded keeps serving
    assert len(loads) == 1 and "JSONDecodeError" in (model.duration.error or "")


def transition_request(h, k, rng):
    return {"H": h[None], "ACTION_JOB": rng.normal(size=(1, k, SPEC.job_dim)).astype(np.float32),
            "ACTION_NODE": rng.integers(0, len(h), size=(1, k)), "ACTION_PAIR": rng.normal(size=(1, k, SPEC.pair_dim)).astype(np.float32)}  # fmt: skip


def test_transition_is_absent_without_a_transition_head(tmp_path):
    publish(tmp_path, "v1", seed=0)
    model = PredictorModel(ModelHost(tmp_path / "latest"))
    assert "transition absent" in model.describe()
    with pytest.raises(ValueError, match="transition model absent"):
        model([transition_request(np.zeros((4, 8), np.float32), 2, np.random.default_rng(0))])


def test_transition_is_t_applied_k_times(tmp_path):
    if "transition" not in {f.name for f in dataclasses.fields(ModelConfig)}:
        pytest.fail("ModelConfig has no transition option")
    publish(tmp_path, "vt", seed=4, transition=True)
    host = ModelHost(tmp_path / "latest")
    rng = np.random.default_rng(1)
    h = rng.normal(size=(6, 8)).astype(np.float32)
    req = transition_request(h, 3, rng)
    (answer,) = PredictorModel(host)([req])
    model: Scorer = host.loaded.model
    from inference.model.scorer import Action

    x = torch.from_numpy(h)[None]
    with torch.inference_mode():
        for j, n, p in zip(req["ACTION_JOB"][0], req["ACTION_NODE"][0], req["ACTION_PAIR"][0], strict=True):
            x = model.transition(x, Action(torch.from_numpy(j)[None], torch.tensor([int(n)]), torch.from_numpy(p)[None]))
    np.testing.assert_allclose(answer["H_NEXT"][0], x[0].numpy(), atol=1e-6)
    assert not np.allclose(answer["H_NEXT"][0], h)
    np.testing.assert_allclose(rollout(model, h, req["ACTION_JOB"][0][:0], req["ACTION_NODE"][0][:0],
                                       req["ACTION_PAIR"][0][:0]), h)  # fmt: skip
