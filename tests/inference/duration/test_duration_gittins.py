"""``gittins-learned``: the Gittins index over the learned predictor's neighbours."""

from __future__ import annotations

import numpy as np

import inference.duration.gittins  # noqa: F401  (registers gittins-learned)
from inference.duration.config import DurationConfig
from inference.duration.features import SHAPE_DIM
from inference.duration.gittins import GittinsLearned, neighbours_and_blend, predictive_samples
from inference.duration.predictor import LearnedDurationPredictor
from inference.duration.regression import MlpRegressor
from scheduling.duration_estimate import estimator_for
from scheduling.job import JobRequest
from scheduling.orderings import get_ordering
from scheduling.policies import get_policy


def _job(i: int, app: str, submit: float, **kw: object) -> JobRequest:
    return JobRequest(job_id=f"{app}-{i}", app=app, text=app, cpu_milli=1000, submit_time=submit, **kw)  # type: ignore[arg-type]


def _predictor(k: int = 5) -> LearnedDurationPredictor:
    """Retrieval only: "flaky" ran 5 s twice and 2000 s three times, "steady" 1000 s five times."""
    p = LearnedDurationPredictor(DurationConfig(encoder="hashed-ngram-32", text_dim=32, mode="retrieval", k=k, tau=1.0))
    runs = [("flaky", d) for d in (5.0, 2000.0, 5.0, 2000.0, 2000.0)] + [("steady", 1000.0)] * 5
    p.observe_many([_job(i, app, 0.0) for i, (app, _) in enumerate(runs)], [d for _, d in runs])
    return p


def test_uses_the_spread_of_the_neighbours_not_only_the_median() -> None:
    p = _predictor()
    jobs = [_job(9, "steady", 1.0), _job(9, "flaky", 2.0)]
    # medians: steady 1000 s, flaky 2000 s -> sjf-learned runs steady first
    assert [j.app for j in get_ordering("sjf-learned", predictor=p).order(jobs, 3.0, None)] == ["steady", "flaky"]
    # flaky finishes within 5 s with odds 2/5: index 0.4 / 5 s = 0.08, steady's 1 / 1000 s
    g = GittinsLearned(predictor=p)
    assert [j.app for j in g.order(jobs, 3.0, None)] == ["flaky", "steady"]
    # its mean (1202 s) is above steady's 1000 s: the mean rule keeps steady first
    assert [j.app for j in GittinsLearned(predictor=p, rule="mean").order(jobs, 3.0, None)] == ["steady", "flaky"]
    # a declared run time is taken as known
    declared = [_job(9, "steady", 1.0, runtime_estimate_s=1.0), _job(9, "flaky", 2.0)]
    assert [j.app for j in g.order(declared, 3.0, None)] == ["steady", "flaky"]
    assert estimator_for(get_policy("gittins-learned+best-fit", ordering_options={"predictor": p})) is p


def test_samples_are_the_neighbours_and_the_blend_is_the_predictors() -> None:
    p = _predictor()
    jobs = [_job(9, "flaky", 1.0), _job(9, "steady", 2.0)]
    s, w = predictive_samples(p, jobs, "neighbours")
    assert sorted(np.round(s[0]).tolist()) == [5.0, 5.0, 2000.0, 2000.0, 2000.0]
    assert np.allclose(s[1], 1000.0) and (w > 0).all()
    centred, _ = predictive_samples(p, jobs, "centred")
    assert np.allclose(np.sort(centred[0]), np.sort(s[0]), rtol=1e-5)  # retrieval mode: the median is the answer
    # with a regression, a history and a partial blend, the blend recomputed from the neighbours
    # is exactly components().blend
    cfg = DurationConfig(encoder="hashed-ngram-32", text_dim=32, k=3, tau=0.05, blend_max=0.7, blend_scale=0.5,
                         regression_shift=0.3, history_weight=0.5, history_min_count=1)  # fmt: skip
    q = LearnedDurationPredictor(cfg, regressor=MlpRegressor(32 + SHAPE_DIM, hidden=8, layers=1))
    runs = [_job(i, f"app{i % 4}", 0.0) for i in range(12)]
    q.observe_many(runs, [float(10 * (i + 1)) for i in range(12)])
    ask = [_job(99, "app1", 1.0), _job(99, "never-seen", 1.0)]
    _, _, blend = neighbours_and_blend(q, ask)
    assert np.allclose(blend, q.components(ask).blend)
    assert np.allclose(np.exp(blend), q.predict_many(ask))


def test_answers_are_cached_until_the_index_grows() -> None:
    p = _predictor()
    g = GittinsLearned(predictor=p, refresh=0)
    jobs = [_job(9, "steady", 1.0), _job(9, "flaky", 2.0)]
    assert [j.app for j in g.order(jobs, 3.0, None)] == ["flaky", "steady"]
    # steady's recent runs take 1 s: its neighbours (the 5 most recent at distance 0) say so
    p.observe_many([_job(100 + i, "steady", 3.0) for i in range(5)], [1.0] * 5)
    assert [j.app for j in g.order(jobs, 4.0, None)] == ["steady", "flaky"]
    lazy = GittinsLearned(predictor=_predictor(), refresh=100)
    lazy.order(jobs, 3.0, None)
    lazy.predictor.observe_many([_job(100 + i, "steady", 3.0) for i in range(5)], [1.0] * 5)
    assert [j.app for j in lazy.order(jobs, 4.0, None)] == ["flaky", "steady"]  # not yet refreshed
    # many jobs: one vectorised pass, every job ranked once
    many = [_job(i, "steady" if i % 2 else "flaky", float(i)) for i in range(300)]
    out = g.order(many, 500.0, None)
    assert sorted(j.job_id for j in out) == sorted(j.job_id for j in many)
