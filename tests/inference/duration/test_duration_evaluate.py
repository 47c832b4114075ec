from __future__ import annotations

import numpy as np

from inference.duration.evaluate import Finished, Split, accuracy, replay_online, time_split
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


def seen_at_prediction(split: Split) -> dict[str, list[str]]:
    """Per held-out job, the jobs the online replay had observed when it was predicted."""
    seen: list[str] = []
    at_predict: dict[str, list[str]] = {}

    def predict(jobs: list[JobRequest]) -> dict[str, np.ndarray]:
        for j in jobs:
            at_predict[j.job_id] = list(seen)
        return {"x": np.ones(len(jobs))}

    replay_online(split, lambda jobs, d: seen.extend(j.job_id for j in jobs), predict)
    return at_predict


def test_replay_observes_only_what_finished_before_each_submission() -> None:
    recs = [_rec(0, 0, 5), _rec(1, 10, 25), _rec(2, 20, 1), _rec(3, 30, 1), _rec(4, 40, 1)]
    assert seen_at_prediction(time_split(recs, 0.6)) == {"j3": [], "j4": ["j3", "j1"]}  # j1 finished at 35, j3 at 31


def test_a_job_of_no_time_is_not_observed_before_its_own_prediction() -> None:
    # found by review: finish <= t let a 0 s job submitted at t be observed (its own run time) first
    recs = [_rec(0, 0, 5), _rec(1, 10, 1), _rec(2, 20, 0), _rec(3, 20, 4), _rec(4, 30, 1)]
    s = time_split(recs, 0.4)  # cut at t = 20: j2, j3, j4 held out
    assert seen_at_prediction(s) == {"j2": [], "j3": [], "j4": ["j2", "j3"]}


def test_the_history_baseline_is_warmed_in_finish_order() -> None:
    # found by review: bench duration fed it in submission order, so its window of the 256 latest run
    # times held other jobs than a worker's would. Here the 150 first submitted run 10,000 s and finish
    # last: in finish order the window holds all of them (median 10,000 s), in submission order 106.
    from inference.duration.evaluate import warm_history

    recs = [_rec(i, float(i), 10_000.0 if i < 150 else 1.0) for i in range(300)]
    assert warm_history(recs).predict(JobRequest(job_id="new", submit_time=400)) == 10_000.0


def test_running_at_the_cut_is_what_had_started_and_not_ended_whether_or_not_it_finishes_later() -> None:
    """Found by review: the censored rows were the split's late jobs, those that finish later in the
    trace (future information), which left out the longest, still running at the trace's end."""
    from inference.duration.evaluate import Run, running_at_cut

    recs = [_rec(0, 0, 5), _rec(1, 10, 100), _rec(2, 20, 1), _rec(3, 30, 1), _rec(4, 40, 1)]
    s = time_split(recs, 0.6)  # cut at t = 30: j0, j2 trained on; j1 late
    runs = [Run(r.job, r.submit, r.submit + (2 if r.job.job_id == "j1" else 0), r.submit + r.duration)
            for r in recs]  # fmt: skip
    runs += [Run(JobRequest(job_id="long", submit_time=5), 5, 8, None),  # still running at the trace's end
             Run(JobRequest(job_id="killed", submit_time=6), 6, 7, 25),  # ended before the cut, never finished
             Run(JobRequest(job_id="queued", submit_time=12), 12, None, None),  # never started
             Run(JobRequest(job_id="later", submit_time=15), 15, 31, None)]  # started after the cut  # fmt: skip
    runs += [Run(JobRequest(job_id="long", submit_time=5), 5, 20, None)]  # an attempt whose end never came
    rows = running_at_cut(s, runs)
    got = {job.job_id: (started, elapsed) for job, started, elapsed in rows}
    assert got == {"j1": (12, 18), "long": (20, 10)}  # elapsed since its latest run began
    assert len(rows) == len(got)  # one row a job (found by review: twice when two attempts looked running)
    assert [(j.job_id, e) for j, _, e in running_at_cut(s)] == [("j1", 20)]  # without runs: the late jobs


def test_accuracy_figures() -> None:
    a = accuracy([10.0, 25.0, 1.0, np.nan], [10.0, 10.0, 10.0, 10.0])
    assert a["answered"] == 0.75
    assert a["within_100pct"] == 0.5  # 10 (exact) and 1 (under-predicted: still within 100 %)
    assert a["within_2x"] == 0.25  # only the exact one


def test_a_job_finishing_at_the_cut_is_not_trained_on() -> None:
    """The replay observes only jobs finished strictly before a prediction's time, so a model trained at the
    cut cannot have a label that ends at it (found by review: ``<=`` trained on it)."""
    split = time_split([_rec(0, 0.0, 10.0), _rec(1, 5.0, 4.0), _rec(2, 10.0, 1.0), _rec(3, 11.0, 1.0)], 0.5)
    assert split.cut == 10.0
    assert [r.job.job_id for r in split.train] == ["j1"] and [r.job.job_id for r in split.late] == ["j0"]


def test_a_job_that_queued_and_ended_after_the_cut_is_not_trained_on_when_the_source_says_when_it_ended() -> None:
    """The archive knows each job's end: one submitted at 0 that queued 900 s, ran 100 s and ended at 1,000 is
    late at a cut of 400, not a training label (found by review: submit + run time put it at 100)."""
    from inference.duration.archive import as_records
    from scheduling.events import JobSubmitted
    from storage.queries.finished_jobs import FinishedJob

    rows = [FinishedJob(JobSubmitted(job_id=j), submit, run, end)
            for j, submit, run, end in (("queued", 0.0, 100.0, 1000.0), ("quick", 100.0, 50.0, 150.0),
                                        ("a", 400.0, 10.0, 410.0), ("b", 500.0, 10.0, 510.0))]  # fmt: skip
    split = time_split(as_records(rows), 0.5)
    assert split.cut == 400.0 and [r.job.job_id for r in split.train] == ["quick"]
    assert [r.job.job_id for r in split.late] == ["queued"]
