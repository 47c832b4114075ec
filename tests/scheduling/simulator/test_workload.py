"""scheduling/simulator/workload.py: what a replay's workload keeps and what it leaves out."""

from scheduling.events import JobSubmitted, NodeTelemetry
from scheduling.policies import get_policy
from scheduling.simulator import SimConfig, simulate
from scheduling.simulator.workload import build_workload


def _job(job_id: str, duration: float | None, **kw: object) -> tuple[float, JobSubmitted]:
    return 0.0, JobSubmitted(job_id=job_id, cpu_milli=1000, num_gpu=1, gpu_milli=1000, trace_duration_s=duration,
                             **kw)  # type: ignore[arg-type]  # fmt: skip


def test_a_gang_short_of_members_is_left_out_whole_and_counted():
    """Found by review: a gang member without a run time was left out alone, the rest of its gang waited
    for it for ever, and the replay's mean JCT and queueing left them out without a word."""
    nodes = [NodeTelemetry(node_id=f"n{i}", cpu_milli=8000, memory_mib=8192, num_gpu=2, gpu_model="T4")
             for i in range(2)]  # fmt: skip
    jobs = [_job("a", 100.0), _job("g1", 50.0, gang_id="g", gang_size=2), _job("g2", None, gang_id="g", gang_size=2),
            _job("h1", 50.0, gang_id="h", gang_size=2), _job("h2", 60.0, gang_id="h", gang_size=2)]  # fmt: skip
    w = build_workload(nodes, jobs)
    assert sorted(j.job_id for j in w.jobs) == ["a", "h1", "h2"]
    assert w.skipped == {"no_duration": 1, "incomplete_gang": 1}
    r = simulate(w.nodes, w.jobs, get_policy("best-fit"), SimConfig(step_s=1.0))
    assert {o.job_id: o.state for o in r.outcomes} == {"a": "finished", "h1": "finished", "h2": "finished"}
