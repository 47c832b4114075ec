from __future__ import annotations

import math

import numpy as np

from inference.duration.history import FAMILIES, KeyHistory, job_keys
from scheduling.job import JobRequest


def _job(job_id: str, app: str | None = None, user: str = "", cpu: int = 1000, text: str = "") -> JobRequest:
    return JobRequest(job_id=job_id, app=app, user=user, cpu_milli=cpu, memory_mib=1024, text=text)


def test_the_name_key_drops_the_parts_that_name_the_app() -> None:
    # a Google task: its job id is the app; the program name stays
    job = _job("62-0", app="62", user="u1", text="prog | 62 | job_id=62 | logical_job_name=prog")
    keys = dict(zip(FAMILIES, job_keys(job), strict=True))
    assert keys["app"] == "a:62" and keys["user"] == "u:u1"
    assert "62" not in keys["name"] and "prog" in keys["name"]
    assert keys["exact"] is not None and "1000/1024" in keys["exact"]
    assert dict(zip(FAMILIES, job_keys(_job("x")), strict=True))["app"] is None


def test_features_are_the_median_count_and_spread_of_the_last_window() -> None:
    hist = KeyHistory(window=3)
    a1, a2, other = _job("1", app="a"), _job("2", app="a", cpu=8000), _job("3", app="b", cpu=64000)
    f = hist.features([a1])
    assert np.isnan(f[0, 0, 0]) and f[0, 0, 1] == 0.0  # nothing finished yet
    hist.observe_many([a1, a1, a1, a1], [1.0, 5.0, 6.0, 7.0])  # the window keeps 5, 6, 7
    f = hist.features([a2, other])
    app = FAMILIES.index("app")
    assert f[0, app, 0] == 6.0 and math.isclose(f[0, app, 1], math.log1p(4)) and f[0, app, 2] == 1.0
    assert np.isnan(f[1, app, 0])  # another app has no history
    assert np.isnan(f[0, FAMILIES.index("exact"), 0])  # a2 asks for other resources than a1


def test_state_round_trip() -> None:
    hist = KeyHistory(window=4)
    jobs = [_job(str(i), app="a", user="u") for i in range(6)]
    hist.observe_many(jobs, np.arange(6.0))
    back = KeyHistory()
    back.load_state(hist.state())
    np.testing.assert_array_equal(back.features(jobs[:1]), hist.features(jobs[:1]))


def test_specific_takes_the_most_specific_key_with_enough_runs() -> None:
    hist = KeyHistory(window=8)
    same, other_size = _job("1", app="a"), _job("2", app="a", cpu=4000)
    hist.observe_many([same, same], [2.0, 2.0])  # the exact request: 2 runs
    hist.observe_many([other_size] * 3, [9.0, 9.0, 9.0])  # the app: 5 runs in all
    assert hist.specific([same], min_count=2)[0] == 2.0  # the exact request has enough
    assert hist.specific([same], min_count=3)[0] == 9.0  # falls back to the app's median (2, 2, 9, 9, 9)
    assert np.isnan(hist.specific([_job("3", app="b", cpu=64000)], min_count=1)[0])
