from __future__ import annotations

import numpy as np

from inference.duration.features import SHAPE_DIM, SHAPE_NAMES, JobFeaturiser, duration_text, shape_features
from inference.encoders import EncoderCache, get_encoder
from scheduling.events import JobSubmitted
from scheduling.job import JobRequest


def _job(**kw: object) -> JobRequest:
    base = dict(job_id="instance_7", name="instance_7", app="app_3",
                labels={"lifetime": "complete", "pod_phase": "Failed", "role": "HN", "task_index": "12"})
    base.update(kw)
    return JobRequest.from_event(JobSubmitted(**base))  # type: ignore[arg-type]


def test_duration_text_strips_outcomes_and_per_job_ids() -> None:
    text = duration_text(_job(user="alice"))
    assert "lifetime" not in text and "pod_phase" not in text and "Failed" not in text
    assert "instance_7" not in text and "task_index" not in text
    assert "app_3" in text and "role=HN" in text and text.endswith("user=alice")


def test_a_simulator_replica_reads_like_its_original() -> None:
    from dataclasses import replace

    original = _job()
    replica = replace(original, job_id="instance_7#1")  # scheduling.simulator.workload.scale_jobs
    assert duration_text(replica) == duration_text(original)


def test_features_never_read_the_recorded_duration() -> None:
    a, b = _job(trace_duration_s=5.0), _job(trace_duration_s=50_000.0)
    feat = JobFeaturiser(EncoderCache(get_encoder("hashed", 32)))
    ta, sa = feat([a])
    tb, sb = feat([b])
    np.testing.assert_array_equal(ta, tb)
    np.testing.assert_array_equal(sa, sb)


def test_shape_features_see_resources_and_estimates() -> None:
    small, big = _job(cpu_milli=1000, num_gpu=1), _job(cpu_milli=32000, num_gpu=4, runtime_estimate_s=600.0)
    s = shape_features([small, big])
    assert s.shape == (2, SHAPE_DIM) == (2, len(SHAPE_NAMES))
    col = {n: i for i, n in enumerate(SHAPE_NAMES)}
    assert s[1, col["log_cores"]] > s[0, col["log_cores"]]
    assert s[1, col["num_gpu"]] == 0.5
    assert (s[0, col["has_estimate"]], s[1, col["has_estimate"]]) == (0.0, 1.0)
