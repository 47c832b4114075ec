"""The learned policy with SEMSCHED_INFERENCE=triton: the same decisions as in-process through a
real tritonserver; a step whose server is down is decided by the fallback and says why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from inference_helpers import pod_mix, small_nodes, small_snapshot

from inference.policy import LearnedPolicy
from inference.serving.process import free_ports
from scheduling.assign import schedule_step
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot


def placements(result):
    return [(x.job_id, x.node_index, x.gpu_indices) for x in result.placements]


def distinct_snapshot() -> ClusterSnapshot:
    """``small_snapshot`` with no two nodes alike: identical nodes score the same in-process, and
    a few 1e-8 apart on the server (another process's float sums), which picks either of them."""
    return ClusterSnapshot.from_nodes([replace(n, cpu_milli=n.cpu_milli + 500 * i)
                                       for i, n in enumerate(small_nodes())])  # fmt: skip


async def test_the_learned_policy_decides_the_same_on_triton_as_in_process(served, monkeypatch):
    monkeypatch.setenv("SEMSCHED_INFERENCE", "triton")
    snap, jobs = distinct_snapshot(), pod_mix(30, seed=2)
    remote = LearnedPolicy(served.latest, backend_kwargs={"url": served.url, "deadline_ms": 5000})
    assert remote.backend.name == "triton" and not remote.fell_back
    status = await remote.prepare_step(snap, jobs, 4.0)
    assert not status.fallback and status.backend == "triton" and status.version == remote.model_version
    got = schedule_step(snap, jobs, remote, now=4.0)
    local = LearnedPolicy(served.root / status.version, backend="in-process")
    await local.prepare_step(snap, jobs, 4.0)
    want = schedule_step(snap, jobs, local, now=4.0)
    assert got.placements and placements(got) == placements(want)
    # the pair features the client computed while the request travelled (in-step re-scoring reads them)
    np.testing.assert_array_equal(remote._step.pairs, local._step.pairs)
    assert remote.model_calls == 1 and not remote.last_step.fallback
    np.testing.assert_allclose(remote.score_all(jobs, snap), local.score_all(jobs, snap), atol=1e-5)


async def test_windows_opened_within_the_step_are_called_on_triton_too(served):
    """A step longer than the model window (inference/policy.py): the prepared call covers the head
    of the order; the windows the step opens later go to the server synchronously, from inside the
    running event loop as in the worker, and decide as the same windows in-process."""
    snap, jobs = distinct_snapshot(), pod_mix(30, seed=2)
    remote = LearnedPolicy(served.latest, backend="triton", window=8,
                           backend_kwargs={"url": served.url, "deadline_ms": 5000})  # fmt: skip
    status = await remote.prepare_step(snap, remote.queue_order(jobs, 4.0), 4.0)
    got = schedule_step(snap, jobs, remote, now=4.0)
    local = LearnedPolicy(served.root / status.version, backend="in-process", window=8)
    await local.prepare_step(snap, local.queue_order(jobs, 4.0), 4.0)
    want = schedule_step(snap, jobs, local, now=4.0)
    assert len(got.placements) > 8 and remote.model_calls == local.model_calls > 1
    assert not remote.last_step.fallback and not remote.fallback_jobs and remote.last_step.backend == "triton"
    assert placements(got) == placements(want)
    remote.close()


async def test_triton_down_means_the_fallback_decides_and_the_record_says_so(served):
    p = LearnedPolicy(served.latest, backend="triton", fallback="best-fit",
                      backend_kwargs={"url": f"127.0.0.1:{free_ports(1)[0]}", "deadline_ms": 500})  # fmt: skip
    snap, jobs = small_snapshot(), pod_mix(12)
    status = await p.prepare_step(snap, jobs, 1.0)
    assert status.fallback and status.backend == "triton" and "UNAVAILABLE" in status.reason
    got = schedule_step(snap, jobs, p, now=1.0)
    want = schedule_step(snap, jobs, get_policy("best-fit"), now=1.0)
    assert placements(got) == placements(want) and p.last_step.fallback


def test_triton_down_on_the_synchronous_path_falls_back_too(served):
    """The simulator and the fill benchmark score without prepare_step: the first score of the step
    calls the server there, and a dead one must hand the step to the fallback, not raise out of
    schedule_step (untested before: the test review)."""
    p = LearnedPolicy(served.latest, backend="triton", fallback="best-fit",
                      backend_kwargs={"url": f"127.0.0.1:{free_ports(1)[0]}", "deadline_ms": 500})  # fmt: skip
    snap, jobs = small_snapshot(), pod_mix(12)
    got = schedule_step(snap.copy(), jobs, p, now=1.0)
    assert p.last_step.fallback and p.last_step.backend == "triton" and "UNAVAILABLE" in p.last_step.reason
    assert placements(got) == placements(schedule_step(snap.copy(), jobs, get_policy("best-fit"), now=1.0))
    assert got.placements and {x.job_id for x in got.placements} <= p.fallback_jobs


async def test_a_step_over_its_step_deadline_is_decided_by_the_fallback_and_the_next_one_is_not(served):
    # each call alone has 5 s; the step as a whole has 1 ms: the fallback decides it and says why
    p = LearnedPolicy(served.latest, backend="triton", fallback="best-fit",
                      backend_kwargs={"url": served.url, "deadline_ms": 5000, "encode_deadline_ms": 5000,
                                      "step_deadline_ms": 0.001})  # fmt: skip
    snap, jobs = small_snapshot(), pod_mix(20, seed=5)
    status = await p.prepare_step(snap, jobs, 2.0)
    assert status.fallback and "step deadline" in status.reason, status.reason
    got = schedule_step(snap.copy(), jobs, p, now=2.0)
    assert placements(got) == placements(schedule_step(snap.copy(), jobs, get_policy("best-fit"), now=2.0))
    # nothing is left half-done (the cancelled call, the pair thread): the next step is the model's
    p.backend.step_deadline_ms = None
    status = await p.prepare_step(snap, jobs, 3.0)
    assert not status.fallback, status.reason
    local = LearnedPolicy(served.root / status.version, backend="in-process")
    await local.prepare_step(snap, jobs, 3.0)
    assert placements(schedule_step(snap.copy(), jobs, p, now=3.0)) == placements(
        schedule_step(snap.copy(), jobs, local, now=3.0))  # fmt: skip


async def test_closing_the_policy_unregisters_its_shared_memory_region_from_the_server(served):
    """What a stopping worker does (streams/worker.py ``close_policy``); found by review: nothing closed
    the backend, so a worker's region stayed registered and allocated in the server after it exited."""
    from inference.serving.client import TritonBackend

    p = LearnedPolicy(served.latest, backend="triton", backend_kwargs={"url": served.url, "deadline_ms": 5000})
    status = await p.prepare_step(distinct_snapshot(), pod_mix(20, seed=3), 1.0)
    assert not status.fallback, status.reason
    region, headers = p.backend.lane.region, p.backend.lane.headers()
    assert region is not None  # the step's tensors went through a region
    other = TritonBackend(served.latest, url=served.url, shared_memory="off")

    def registered() -> set[str]:
        return set(other._sync_client().get_system_shared_memory_status(headers=headers, as_json=True)
                   .get("regions", {}))  # fmt: skip

    try:
        assert region.name in registered()
        p.close()
        assert region.name not in registered()
    finally:
        other.close()
