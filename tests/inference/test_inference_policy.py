import numpy as np
import torch
from inference_helpers import job, pod_mix, small_snapshot

import inference  # noqa: F401  (registers "learned")
from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, load_model, save_model
from inference.model.io import LoadedModel
from inference.policy import MODEL_DIR_ENV, LearnedPolicy
from scheduling.assign import schedule_step
from scheduling.filters.framework import run_filters
from scheduling.policies import get_policy

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


def untrained(tmp_path, seed: int = 0) -> LoadedModel:
    torch.manual_seed(seed)
    save_model(tmp_path / "m", Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2)), "test-v1")
    return load_model(tmp_path / "m")


class CountingPolicy(LearnedPolicy):
    """Counts fusion-encoder runs."""

    encodes = 0

    def encode(self, snapshot):
        self.encodes += 1
        return super().encode(snapshot)


def test_missing_model_falls_back_to_fgd(tmp_path):
    p = get_policy("learned", model_dir=tmp_path / "nothing")
    assert isinstance(p, LearnedPolicy) and p.fell_back and p.model_version is None
    assert "FileNotFoundError" in p.fallback_reason
    snap = small_snapshot()
    j = job(gpus=1, per=500)
    mask = run_filters(j, snap, explain=False).feasible_mask
    fgd = get_policy("fgd")
    np.testing.assert_array_equal(p.score(j, snap, mask), fgd.score(j, snap, mask))
    result = schedule_step(snap, pod_mix(20), p, now=0.0)
    assert result.placements


def test_corrupt_model_falls_back_and_env_names_the_dir(tmp_path, monkeypatch):
    d = tmp_path / "m"
    save_model(d, Scorer(ModelConfig(spec=SPEC, hidden=8)), "v")
    (d / "model.pt").write_bytes(b"not a model")
    monkeypatch.setenv(MODEL_DIR_ENV, str(d))
    p = LearnedPolicy(fallback="best-fit")
    assert p.model_dir == d and p.fell_back and p.fallback.name == "best-fit"


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(1)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, depth=3))
    save_model(tmp_path / "m", model, "v7", {"loss": [1.0]})
    loaded = load_model(tmp_path / "m")
    assert loaded.version == "v7" and loaded.config == model.config
    for a, b in zip(model.state_dict().values(), loaded.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    p = LearnedPolicy(tmp_path / "m")
    assert not p.fell_back and p.model_version == "v7"
    fast = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=4, head_layers=1))
    save_model(tmp_path / "fast", fast, "v8")
    assert load_model(tmp_path / "fast").config.head_layers == 1


def test_infeasible_nodes_are_never_chosen(tmp_path):
    p = LearnedPolicy(loaded=untrained(tmp_path))
    snap = small_snapshot()
    j = job(gpus=1, per=500)
    mask = run_filters(j, snap, explain=False).feasible_mask
    free_scores = p.score(j, snap, np.ones(snap.num_nodes, bool))
    narrowed = mask.copy()
    narrowed[int(np.argmax(free_scores))] = False  # veto the model's favourite
    scores = p.score(j, snap, narrowed)
    assert np.all(scores[~narrowed] == -np.inf) and np.isfinite(scores[narrowed]).all()
    result = schedule_step(snap, pod_mix(80, seed=2), p, now=100.0)
    check = snap.copy()
    for pl in sorted(result.placements, key=lambda x: result.order.index(x.job_id)):
        jb = next(x for x in pod_mix(80, seed=2) if x.job_id == pl.job_id)
        assert run_filters(jb, check, explain=False).feasible_mask[pl.node_index]
        check.reserve(pl.node_index, jb, pl.gpu_indices)


def test_encoder_runs_once_per_step_and_scores_track_reservations(tmp_path):
    loaded = untrained(tmp_path)
    p = CountingPolicy(loaded=loaded)
    snap = small_snapshot()
    result = schedule_step(snap, pod_mix(15), p, now=0.0)
    assert len(result.placements) > 1 and p.encodes == 1  # one step: one encoder run
    schedule_step(snap, pod_mix(15), p, now=1.0)
    assert p.encodes == 2  # a new step (order() + a new snapshot copy)
    # without order() on one long-lived snapshot (the fill benchmark): every refresh_every calls
    q = CountingPolicy(loaded=loaded, refresh_every=3)
    live = small_snapshot()
    j = job(gpus=1, per=250)
    mask = run_filters(j, live, explain=False).feasible_mask
    before = q.score(j, live, mask)
    i = int(np.argmax(before))
    live.reserve(i, j, [0])
    after = q.score(j, live, mask)
    assert q.encodes == 1 and after[i] != before[i]  # the head sees the reservation without re-encoding
    np.testing.assert_array_equal(np.delete(after, i), np.delete(before, i))
    for _ in range(4):
        q.score(j, live, mask)
    assert q.encodes == 2


def test_batched_scores_equal_one_by_one(tmp_path):
    p = LearnedPolicy(loaded=untrained(tmp_path))
    snap = small_snapshot()
    jobs = pod_mix(12)
    p.order(jobs, 5.0)
    batched = p.score_all(jobs, snap, now=5.0)
    everywhere = np.ones(snap.num_nodes, bool)
    for row, j in zip(batched, jobs, strict=True):
        np.testing.assert_allclose(row, p.score(j, snap, everywhere), rtol=1e-5, atol=1e-6)
