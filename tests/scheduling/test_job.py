from datetime import UTC, datetime

import pytest

from scheduling.events import JobSubmitted
from scheduling.job import JobRequest


def test_from_event_copies_fields_and_normalises_share():
    t = datetime(2026, 1, 1, tzinfo=UTC)
    ev = JobSubmitted(job_id="p1", cluster="c1", tenant="t", priority=3, qos="LS", cpu_milli=6000,
                      memory_mib=12288, num_gpu=2, gpu_models=["V100M16", "V100M32"], gang_id="g", gang_size=2,
                      app="web", max_instances_per_node=1, runtime_estimate_s=5.0, trace_duration_s=7.0,
                      event_time=t)  # fmt: skip
    j = JobRequest.from_event(ev)
    assert (j.job_id, j.cluster, j.tenant, j.priority, j.qos) == ("p1", "c1", "t", 3, "LS")
    assert (j.cpu_milli, j.memory_mib, j.num_gpu, j.per_gpu_milli) == (6000, 12288, 2, 1000)
    assert j.gpu_models == frozenset({"V100M16", "V100M32"})
    assert (j.gang_id, j.gang_size, j.is_gang) == ("g", 2, True)
    assert (j.app, j.max_instances_per_node) == ("web", 1)
    assert j.submit_time == t.timestamp()
    assert (j.runtime_estimate_s, j.trace_duration_s, j.attempt) == (5.0, 7.0, 0)


def test_from_event_fractional_and_explicit_submit_time():
    ev = JobSubmitted(job_id="p2", num_gpu=1, gpu_milli=460)
    j = JobRequest.from_event(ev, submit_time=12.5)
    assert j.per_gpu_milli == 460 and j.gpu_demand_milli == 460 and j.submit_time == 12.5
    assert not j.is_gang


def test_cpu_only_job_has_no_gpu_share():
    j = JobRequest(job_id="c", cpu_milli=1000, per_gpu_milli=500)
    assert j.per_gpu_milli == 0 and j.gpu_demand_milli == 0


def test_invalid_requests_raise():
    with pytest.raises(ValueError):
        JobRequest(job_id="x", num_gpu=1, per_gpu_milli=2000)
    with pytest.raises(ValueError):
        JobRequest(job_id="x", gang_size=0)
    with pytest.raises(ValueError):
        JobRequest(job_id="x", max_instances_per_node=0)


def test_several_shared_gpus_are_refused_as_on_the_wire():
    """FGD vetoed a 2 x 500 m job the filters accepted, every step, never rejecting it (found by the
    scheduling review); the wire (JobSubmitted) refuses that shape, and so does a JobRequest."""
    with pytest.raises(ValueError, match="only allowed with num_gpu == 1"):
        JobRequest(job_id="x", num_gpu=2, per_gpu_milli=500)
    assert JobRequest(job_id="y", num_gpu=2, per_gpu_milli=1000).gpu_demand_milli == 2000
    assert JobRequest(job_id="z", num_gpu=2, per_gpu_milli=0).per_gpu_milli == 1000


def test_a_jobs_text_is_cut_to_what_the_encoders_see() -> None:
    """Labels are not bounded on the wire: a submission's text could run to ~250,000 characters, a quarter
    second of a scheduling step in one encode (found by review). Name and command stay whole."""
    from scheduling.events import MAX_TEXT, JobSubmitted
    from scheduling.job import MAX_JOB_TEXT, JobRequest

    labels = {f"k{i:03d}": "v" * 1000 for i in range(200)}
    ev = JobSubmitted(job_id="j", name="n" * MAX_TEXT, command="c" * MAX_TEXT, labels=labels)
    text = JobRequest.from_event(ev).text
    assert len(text) == MAX_JOB_TEXT and text.startswith("n" * MAX_TEXT + " | " + "c" * MAX_TEXT + " | k000=")
    assert JobRequest.from_event(JobSubmitted(job_id="j", name="train", labels={"a": "b"})).text == "train | a=b"
