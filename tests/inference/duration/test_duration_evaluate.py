from __future__ import annotations

import numpy as np

from inference.duration.evaluate import Finished, accuracy, replay_online, time_split
from scheduling.job import JobRequest


def _rec(i: int, submit: float, duration: float) -> Finished:
    return Finished(submit, JobRequest(job_id=f"j{i}", submit_time=submit), duration)


def test_split_never_trains_on_what_finished_after_the_cut() -> None:
    recs = [_rec(0, 0, 5), _rec(1, 10, 100), _rec(2, 20, 1), _rec(3, 30, 1), _rec(4, 40, 1)]
    s = time_split(recs, 0.6)  # cut at the 4th submission, t = 30
    assert s.cut == 30
    assert [r.job.job_id for r in s.train] == ["j0", "j2"]
    assert [r.job.job_id for r in s.late] == ["j1"]  # submitted before, still running at the cut
    assert [r.job.job_id for r in s.test] == ["j3", "j4"]


def test_replay_observes_only_what_finished_before_each_submission() -> None:
    recs = [_rec(0, 0, 5), _rec(1, 10, 25), _rec(2, 20, 1), _rec(3, 30, 1), _rec(4, 40, 1)]
    s = time_split(recs, 0.6)
    seen: list[str] = []
    at_predict: dict[str, list[str]] = {}

    def predict(jobs: list[JobRequest]) -> dict[str, np.ndarray]:
        for j in jobs:
            at_predict[j.job_id] = list(seen)
        return {"x": np.ones(len(jobs))}

    replay_online(s, lambda jobs, d: seen.extend(j.job_id for j in jobs), predict)
    assert at_predict == {"j3": [], "j4": ["j3", "j1"]}  # j1 finished at 35, j3 at 31


def test_accuracy_figures() -> None:
    a = accuracy([10.0, 25.0, 1.0, np.nan], [10.0, 10.0, 10.0, 10.0])
    assert a["answered"] == 0.75
    assert a["within_100pct"] == 0.5  # 10 (exact) and 1 (under-predicted: still within 100 %)
    assert a["within_2x"] == 0.25  # only the exact one
