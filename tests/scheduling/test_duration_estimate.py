import math

import pytest
from sched_builders import job

from scheduling.duration_estimate import HistoryDurationPredictor, keys_for, shape_key
from scheduling.order_context import LearningDurationPredictor, OrderContext
from scheduling.orderings import get_ordering


def test_cold_start_returns_the_default_or_none():
    assert HistoryDurationPredictor().predict(job("x")) is None
    p = HistoryDurationPredictor(cold_start_s=600.0)
    assert p.predict(job("x")) == 600.0
    assert p.explain(job("x")) == (600.0, "cold start")


def test_app_key_wins_once_it_has_enough_samples():
    p = HistoryDurationPredictor(min_samples=3)
    for d in (10.0, 20.0, 1000.0):
        p.observe(job("r", app="recsys", tenant="t1"), d)
    assert p.predict(job("q", app="recsys", tenant="other")) == 20.0  # median, not the mean 343
    assert p.explain(job("q", app="recsys"))[1] == "app=recsys, median of 3"


def test_falls_back_from_app_to_tenant_shape_to_global():
    p = HistoryDurationPredictor(min_samples=2)
    for d in (100.0, 300.0):
        p.observe(job("a", tenant="t", gpus=1, cpu=4000), d)  # no app: tenant+shape and global
    p.observe(job("b", app="etl", tenant="t", gpus=1, cpu=4000), 50.0)
    # the app has 1 < 2 samples → tenant + shape (now 3 samples: 100, 300, 50 → median 100)
    assert p.explain(job("c", app="etl", tenant="t", gpus=1, cpu=3500)) == (100.0, "tenant-shape=t,1,1000,4, median of 3")
    # a different shape → global (all four observations… here three: 100, 300, 50)
    assert p.explain(job("d", tenant="t", gpus=2, cpu=4000)) == (100.0, "global, median of 3")
    # another tenant, same shape → global too
    assert p.explain(job("e", tenant="u", gpus=1, cpu=4000))[1] == "global, median of 3"


def test_global_needs_only_one_sample():
    p = HistoryDurationPredictor(min_samples=5)
    p.observe(job("a", app="x"), 42.0)
    assert p.predict(job("b", app="x")) == 42.0


def test_window_follows_drift_and_median_cache_is_invalidated():
    p = HistoryDurationPredictor(window=3, min_samples=1)
    for d in (1.0, 2.0, 3.0):
        p.observe(job("a", app="w"), d)
    assert p.predict(job("a", app="w")) == 2.0
    for d in (100.0, 200.0):
        p.observe(job("a", app="w"), d)
    assert p.predict(job("a", app="w")) == 100.0  # window is now 3, 100, 200


def test_shape_rounds_cores_up_to_a_power_of_two():
    assert shape_key(job("a", cpu=0)) == (0, 0, 1)
    assert shape_key(job("a", cpu=3000, gpus=1, share=500)) == (1, 500, 4)
    assert shape_key(job("a", cpu=8000)) == (0, 0, 8)
    assert keys_for(job("a", cpu=8000, tenant="t"))[0] == ("tenant-shape", "t", 0, 0, 8)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError):
        HistoryDurationPredictor().observe(job("a"), bad)


def test_never_reads_the_trace_duration():
    p = HistoryDurationPredictor(cold_start_s=7.0)
    assert p.predict(job("a", trace_duration_s=1.0)) == 7.0


def test_drives_sjf_predicted():
    p: LearningDurationPredictor = HistoryDurationPredictor(min_samples=1)
    p.observe(job("old-train", app="train"), 5000.0)
    p.observe(job("old-infer", app="infer"), 30.0)
    jobs = [job("t", app="train", submit_time=0.0), job("i", app="infer", submit_time=1.0)]
    assert [j.job_id for j in get_ordering("sjf-predicted").order(jobs, 2.0, OrderContext(estimator=p))] == ["i", "t"]
