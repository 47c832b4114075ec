from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from inference.duration.config import DurationConfig
from inference.duration.evaluate import Finished, accuracy, replay_online, time_split
from inference.duration.io import load_predictor, save_predictor
from inference.duration.train import train_predictor
from scheduling.order_context import LearningDurationPredictor


@pytest.fixture(scope="module")
def trained(google_finished: list[Finished]) -> tuple[object, object]:
    split = time_split(google_finished, 0.75)
    cfg = DurationConfig(encoder="hashed-ngram-32", text_dim=32, hidden=32, epochs=15, version="test")
    model = train_predictor([r.job for r in split.train], [r.duration for r in split.train], cfg,
                            submit_times=[r.submit for r in split.train])  # fmt: skip
    return model, split


def test_learns_something_on_held_out_jobs(trained: tuple) -> None:
    model, split = trained
    as_protocol: LearningDurationPredictor = model  # what sjf-predicted and the simulator accept
    assert callable(as_protocol.observe) and callable(as_protocol.predict)
    true = np.array([r.duration for r in split.test])
    constant = np.full(len(true), np.median([r.duration for r in split.train]))
    res = replay_online(split, model.observe_many, lambda jobs: {"blend": model.predict_many(jobs)})
    learned, base = accuracy(res["blend"], true), accuracy(constant, true)
    assert learned["answered"] == 1.0
    assert learned["mae_log"] < 0.8 * base["mae_log"], (learned, base)
    assert learned["within_2x"] > base["within_2x"]
    info = model.config.train_info
    assert info["validation"] == "online" and info["fit_jobs"] + info["val_jobs"] <= info["jobs"]


def test_observe_changes_predictions(trained: tuple) -> None:
    model, split = trained
    # a program never seen before (the replay above already observed the held-out jobs, and a
    # key's median of dozens of runs rightly ignores three outliers)
    job = replace(split.test[0].job, job_id="new-0", app="new-app", text=split.test[0].job.text + " | new program")
    before = model.predict(job)
    for _ in range(3):
        model.observe(job, 50_000.0)  # the same job, run very long, three times
    after = model.predict(job)
    assert before is not None and after is not None and after > 1.5 * before
    _, why = model.explain(job)
    assert "nearest" in why and "regression" in why


def test_save_load_round_trip(trained: tuple, tmp_path: Path) -> None:
    model, split = trained
    jobs = [r.job for r in split.test[:50]]
    save_predictor(tmp_path / "m", model)
    assert {p.name for p in (tmp_path / "m").iterdir()} == {"config.json", "duration.pt"}
    loaded = load_predictor(tmp_path / "m")
    assert loaded.version == "test" and len(loaded.index) == len(model.index)
    assert loaded.config.k == model.config.k and loaded.config.blend_scale == model.config.blend_scale
    np.testing.assert_allclose(loaded.predict_many(jobs), model.predict_many(jobs), rtol=1e-5)
    assert len(loaded.history) == len(model.history)  # the per-key histories are saved too
    assert loaded.config.history_weight == model.config.history_weight


def test_load_rejects_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"format": 99}')
    with pytest.raises(ValueError, match="format"):
        load_predictor(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_predictor(tmp_path / "missing")


def test_the_regression_is_offset_by_its_validation_shift(trained: tuple) -> None:
    model, split = trained
    info = model.config.train_info
    assert info["val_jobs"] >= 100 and info["chosen"]["regression_shift"] == model.config.regression_shift
    assert info["val_mae_log"]["regression"] <= info["val_mae_log"]["regression_unshifted"] + 1e-9
    jobs = [r.job for r in split.test[:20]]
    text, shape, _ = model.features(jobs)
    mlp = model.regressor.predict(np.concatenate([text, shape], axis=1))
    np.testing.assert_allclose(model.components(jobs).regression, mlp + model.config.regression_shift, atol=1e-6)


def test_a_full_feature_cache_keeps_the_jobs_of_the_call_that_fills_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: past the cache's size it kept only the jobs it had just computed, and a job cached at
    an earlier step, asked again beside a new arrival, raised KeyError (a failed worker step; in the
    simulator the whole run ended)."""
    from inference.duration import predictor as module
    from scheduling.job import JobRequest

    monkeypatch.setattr(module, "FEATURE_CACHE_JOBS", 3)
    p = module.LearnedDurationPredictor(DurationConfig(version="d", mode="retrieval", encoder="hashed-ngram-16",
                                                       text_dim=16))  # fmt: skip
    old = [JobRequest(f"old-{i}", cpu_milli=1000 * (i + 1)) for i in range(3)]
    before = p.features(old)
    new = JobRequest("new", cpu_milli=500)
    text, shape, _ = p.features([old[0], new])  # over the size: starts over
    assert np.array_equal(text[0], before[0][0]) and np.array_equal(shape[0], before[1][0])
    assert np.array_equal(shape[1], p.features([new])[1][0]) and len(p._features) <= 3


def test_the_history_is_tuned_on_the_jobs_in_the_order_they_finished(google_finished, monkeypatch) -> None:
    """Found by review: tuning fed the per-key history by submission + run time, also where the source says
    when each job finished (the archive: a job that queued or was retried finished later), while the served
    model is fed in the order they finished."""
    import inference.duration.train as train

    recs = sorted(google_finished, key=lambda r: r.submit)[:400]
    submits = [r.submit for r in recs]
    finishes = [r.submit + r.duration + (10.0 if k % 3 == 0 else 0.0) for k, r in enumerate(recs)]  # queued
    seen: list[list[str]] = []
    real = train._history_features

    def spy(window, split, jobs, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append([j.job_id for j in jobs])
        return real(window, split, jobs, *args, **kw)

    monkeypatch.setattr(train, "_history_features", spy)
    cfg = DurationConfig(encoder="hashed-ngram-32", text_dim=32, hidden=16, epochs=2, version="t")
    train_predictor([r.job for r in recs], [r.duration for r in recs], cfg, submit_times=submits, finish_times=finishes)
    assert seen, "the history was not tuned"
    finish_of = {r.job.job_id: f for r, f in zip(recs, finishes, strict=True)}
    order = [finish_of[j] for j in seen[0]]
    assert order == sorted(order) and len(order) > 10


def test_jobs_submitted_together_past_the_validation_cut_still_train(google_finished: list[Finished]) -> None:
    """Found by review: 80 jobs submitted at once and 20 later, each running 120 s: the inner validation cut
    fell among the 80, none had finished before it, and training failed ("left no job to fit"). The split is
    then made by count, in submission order, and the model says so."""
    jobs = [r.job for r in google_finished[:100]]
    submit = [0.0] * 80 + [50.0] * 20
    cfg = DurationConfig(encoder="hashed-ngram-8", text_dim=8, hidden=8, epochs=2, version="together")
    model = train_predictor(jobs, [120.0] * 100, cfg, submit_times=submit, finish_times=[s + 120 for s in submit],
                            tune=False, history=False)  # fmt: skip
    info = model.config.train_info
    assert info["fit_jobs"] == 85 and info["val_jobs"] == 15 and info["validation"] == "offline"
    assert "by count" in str(info["validation_split"])
