from __future__ import annotations

import numpy as np

from inference.duration.config import DurationConfig
from inference.duration.predictor import LearnedDurationPredictor
from inference.duration.retrieval import NeighbourIndex, weighted_median
from scheduling.events import JobSubmitted
from scheduling.job import JobRequest


def test_weighted_median() -> None:
    v = np.array([[1.0, 2.0, 3.0], [5.0, 1.0, 9.0]])
    w = np.array([[1.0, 1.0, 1.0], [0.1, 0.1, 5.0]])
    np.testing.assert_array_equal(weighted_median(v, w), [2.0, 9.0])


def test_index_grows_and_drops_the_oldest() -> None:
    idx = NeighbourIndex(4, 2, k=2, max_rows=3)
    for i in range(5):
        idx.add(np.eye(4, dtype=np.float32)[i % 4][None], np.zeros((1, 2)), [float(i)])
    assert len(idx) == 3
    np.testing.assert_array_equal(idx.log_durations, [2.0, 3.0, 4.0])


def _job(i: int, app: str, cpu: int = 4000) -> JobRequest:
    return JobRequest.from_event(JobSubmitted(job_id=f"{app}-{i}", name=f"{app}-{i}", app=app, cpu_milli=cpu,
                                              labels={"role": "CN"}))  # fmt: skip


def test_retrieval_finds_the_same_app_neighbour() -> None:
    p = LearnedDurationPredictor(DurationConfig(encoder="hashed-ngram-64", text_dim=64, mode="retrieval", k=3))
    assert p.predict(_job(0, "ranker")) is None  # nothing observed: no idea
    apps = {"ranker-service": 60.0, "feature-etl-nightly": 36_000.0, "ads-trainer": 3_000.0}
    for app, d in apps.items():
        p.observe_many([_job(i, app) for i in range(5)], [d * (1 + 0.01 * i) for i in range(5)])
    for app, d in apps.items():
        got = p.predict(_job(99, app))
        assert got is not None and abs(got / d - 1) < 0.05, (app, got)
    # the nearest finished job of a new ranker job is a ranker job
    nb = p.index.query(*p.features([_job(100, "ranker-service")])[:2])
    assert 0 <= nb.nearest[0] < 5


def test_a_full_index_drops_a_tenth_of_its_rows_at_a_time() -> None:
    """Found by review: full, it dropped one row per added row, moving the whole index each time."""
    idx = NeighbourIndex(4, 2, k=2, max_rows=100)
    sizes = []
    for i in range(125):
        idx.add(np.eye(4, dtype=np.float32)[i % 4][None], np.zeros((1, 2)), [float(i)])
        sizes.append(len(idx))
    assert sizes[99:102] == [100, 91, 92] and max(sizes) == 100 and sizes[-1] == 95
    np.testing.assert_array_equal(idx.log_durations, np.arange(30, 125, dtype=np.float32))  # the newest, in order
