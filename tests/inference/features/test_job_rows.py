"""The job rows kept from step to step are, bit for bit, what computing them afresh gives."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from inference_helpers import pod_mix

from inference.encoders import EncoderCache, get_encoder
from inference.features.jobs import WAITED, JobRows, job_demand
from inference.features.spec import FeatureSpec

SPEC = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16")


def test_kept_rows_equal_fresh_ones_as_time_passes_jobs_arrive_and_one_is_resubmitted():
    assert SPEC.job_names[WAITED] == "log_waited"
    encoder = EncoderCache(get_encoder(SPEC.encoder))
    pool = [replace(p, submit_time=float(i)) for i, p in enumerate(pod_mix(60, seed=7))]
    rows = JobRows()
    queue = pool[:20]
    for step in range(8):
        now = 30.0 + 7.5 * step
        got = rows(queue, now, SPEC, encoder)
        np.testing.assert_array_equal(got, job_demand(queue, now, SPEC, encoder))
        queue = queue[3:] + pool[20 + 3 * step: 23 + 3 * step]  # some placed, some arrived
    again = replace(queue[0], cpu_milli=queue[0].cpu_milli + 1000)  # the same id, resubmitted larger
    got = rows([again, *queue[1:]], 99.0, SPEC, encoder)
    np.testing.assert_array_equal(got, job_demand([again, *queue[1:]], 99.0, SPEC, encoder))
    assert rows([], 1.0, SPEC, encoder).shape == (0, SPEC.job_dim)


def test_a_full_cache_keeps_the_rows_of_the_call_and_starts_over_for_another_spec():
    encoder = EncoderCache(get_encoder(SPEC.encoder))
    pool = pod_mix(30, seed=2)
    rows = JobRows(max_jobs=10)
    rows(pool[:8], 5.0, SPEC, encoder)
    for queue in (pool[:12], pool[12:20] + pool[:3], pool[5:15]):  # over max_jobs, some seen before
        np.testing.assert_array_equal(rows(queue, 9.0, SPEC, encoder), job_demand(queue, 9.0, SPEC, encoder))
    other = FeatureSpec(gpu_models=("A10",), text_dim=8, encoder="hashed-ngram-8")  # rows of another width
    small = EncoderCache(get_encoder(other.encoder))
    np.testing.assert_array_equal(rows(pool[:4], 9.0, other, small), job_demand(pool[:4], 9.0, other, small))
