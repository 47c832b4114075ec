"""The node-pool filter: a job labelled with a pool runs on that pool's nodes only."""

from sched_builders import job, node, snap

from scheduling.assign import schedule_step
from scheduling.events import JobSubmitted
from scheduling.filters import NodePoolFilter
from scheduling.filters.framework import filter_shape
from scheduling.job import JobRequest
from scheduling.policies import get_policy


def test_a_job_of_a_pool_runs_on_its_nodes_only():
    s = snap(node("cn0", topology={"pool": "CN"}), node("hn0", gpus=8, topology={"pool": "HN"}), node("other"))
    f = NodePoolFilter()
    assert f.mask(job("c", node_pool="CN"), s).tolist() == [True, False, False]
    assert f.mask(job("h", node_pool="HN"), s).tolist() == [False, True, False]
    assert f.mask(job("any"), s).tolist() == [True, True, True]
    assert f.reason(job("c", node_pool="CN")) == "node(s) not in pool CN"


def test_the_pool_comes_from_the_submissions_label_and_keeps_a_cpu_instance_off_the_gpu_nodes():
    """Found by review: the DLRM trace's CPU instances were placed on its GPU nodes (no filter read the pools)."""
    cpu_job = JobRequest.from_event(JobSubmitted(job_id="cn-1", cpu_milli=8000, labels={"pool": "CN"}))
    assert cpu_job.node_pool == "CN" and JobRequest.from_event(JobSubmitted(job_id="x")).node_pool is None
    s = snap(node("hn0", gpus=8, cpu=128_000, topology={"pool": "HN"}), node("cn0", cpu=16_000, topology={"pool": "CN"}))
    r = schedule_step(s, [cpu_job], get_policy("best-fit"), now=0)
    assert [p.node_id for p in r.placements] == ["cn0"]
    assert filter_shape(cpu_job) != filter_shape(JobRequest.from_event(JobSubmitted(job_id="y", cpu_milli=8000)))
