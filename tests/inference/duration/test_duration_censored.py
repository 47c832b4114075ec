"""The censored loss: jobs still running when the training data was cut count as lower bounds."""

from __future__ import annotations

import numpy as np
import torch

from inference.duration.config import DurationConfig
from inference.duration.regression import MlpRegressor, censored_huber
from inference.duration.train import train_predictor
from scheduling.events import JobSubmitted
from scheduling.job import JobRequest


def test_a_censored_row_costs_only_below_its_bound() -> None:
    y = torch.tensor([2.0, 2.0, 2.0, 2.0])
    cens = torch.tensor([True, True, False, False])
    pred = torch.tensor([3.0, 1.5, 3.0, 1.5])  # above / below the value
    per_row = [float(censored_huber(pred[i : i + 1], y[i : i + 1], cens[i : i + 1])) for i in range(4)]
    assert per_row[0] == 0.0  # longer than the lower bound: consistent, free
    assert per_row[1] == per_row[3] == 0.125 and per_row[2] == 0.5  # Huber 0.5·a² below δ = 1
    assert float(censored_huber(pred, y, torch.zeros(4, dtype=torch.bool))) == float(
        torch.nn.HuberLoss(delta=1.0)(pred, y))  # nothing censored: the plain Huber loss


def test_the_mlp_refuses_only_censored_rows() -> None:
    x = np.zeros((4, 3), np.float32)
    reg = MlpRegressor(3, 8, 1)
    try:
        reg.fit(x, np.ones(4), censored=np.ones(4, bool), epochs=1)
    except ValueError as e:
        assert "censored" in str(e)
    else:
        raise AssertionError("all-censored training data must be refused")


def _job(i: int, kind: str) -> JobRequest:
    return JobRequest.from_event(JobSubmitted(job_id=f"{kind}-{i}", name=f"{kind}-task", app=f"app-{kind}",
                                              cpu_milli=1000 if kind == "short" else 8000))  # fmt: skip


def test_still_running_jobs_lift_the_prediction_of_their_kind() -> None:
    """Finished "long" jobs are rare and short (they finished by the cut: survivors); many more of
    the same kind were still running, for 2,000-6,000 s already. Without them the model learns that
    the kind runs about 200 s; with them it must predict several times longer."""
    rng = np.random.default_rng(0)
    kinds = ["short"] * 900 + ["long"] * 100
    rng.shuffle(kinds)
    jobs = [_job(i, k) for i, k in enumerate(kinds)]
    durations = [float(np.exp(rng.normal(np.log(100 if k == "short" else 200), 0.8))) for k in kinds]
    running = [(_job(2000 + i, "long"), 0.0, float(rng.uniform(2_000, 6_000))) for i in range(300)]
    cfg = DurationConfig(encoder="hashed-ngram-16", text_dim=16, hidden=32, epochs=30, mode="regression")
    plain = train_predictor(jobs, durations, cfg, tune=False)
    censored = train_predictor(jobs, durations, cfg, tune=False, running=running)
    probe = _job(9999, "long")
    assert plain.predict(probe) < 600
    assert censored.predict(probe) > 2.5 * plain.predict(probe) and censored.config.train_info["running"] == 300
    assert abs(np.log(censored.predict(_job(9999, "short")) / 100.0)) < np.log(2)  # the other kind unchanged


def test_the_validation_cut_censors_what_had_run_by_then_since_the_start() -> None:
    """At the inner validation cut a censored row's bound is the time the job had *run* by then:
    a job that queued first had run less than since its submission, and one that started after
    the cut was not running there (found by review: both were bounded since submission, which can
    exceed the job's whole run time)."""
    from inference.duration.config import DurationConfig
    from inference.duration.evaluate import Finished, time_split
    from inference.duration.predictor import LearnedDurationPredictor
    from inference.duration.train import _censored_at

    def rec(i: int, submit: float, duration: float, end: float) -> Finished:
        return Finished(submit, _job(i, "short"), duration, end)

    recs = [rec(0, 0, 5, 5), rec(1, 10, 30, 60), rec(2, 20, 15, 40), rec(3, 30, 1, 31), rec(4, 40, 1, 41)]
    split = time_split(recs, 0.6)  # cut at t = 30: j0 trained on; j1 (starts at 30) and j2 (at 25) late
    assert split.cut == 30 and [r.job.job_id for r in split.late] == ["short-1", "short-2"]
    shell = LearnedDurationPredictor(DurationConfig(encoder="hashed-ngram-16", text_dim=16))
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = shell.log_target([r.duration for r in recs])
    pos = {id(r): i for i, r in enumerate(recs)}
    run_x = np.array([[7.0, 7.0], [8.0, 8.0]], np.float32)
    run_started = np.array([22.0, 35.0])  # running at the data cut; the second started after the inner cut
    rows, ys, cens = _censored_at(split, x, y, np.array([0]), pos, shell, run_x, run_started)
    assert rows.tolist() == [x[0].tolist(), x[2].tolist(), [7.0, 7.0]]  # j1 and the late starter: no row
    assert cens.tolist() == [False, True, True]
    assert np.allclose(np.exp(ys), [5.0, 5.0, 8.0])  # run by the cut: 30 − 25, 30 − 22 (not 10 and 8 since submission)


def test_a_job_running_at_the_cut_is_not_hidden_by_another_clusters_trained_job_of_the_same_id() -> None:
    """A job is its cluster and id (found by review: by id alone, cluster a's trained ``j`` dropped cluster
    b's ``j``, running at the cut, from the censored rows)."""
    from dataclasses import replace

    from inference.duration.evaluate import Finished, Run, running_at_cut, time_split

    trained = _job(0, "short")
    other = replace(trained, cluster="b")
    recs = [Finished(0, trained, 5, 5), Finished(10, _job(1, "short"), 1, 11), Finished(20, _job(2, "short"), 1, 21)]
    split = time_split(recs, 0.5)  # cut at 10: trained's job is trained on
    assert split.cut == 10 and [r.job for r in split.train] == [trained]
    runs = [Run(trained, 0, 0, 5), Run(other, 2, 4, None)]  # b's job of the same id runs on past the cut
    assert running_at_cut(split, runs) == [(other, 4, 6)]
