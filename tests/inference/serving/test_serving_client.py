"""TritonBackend against a real tritonserver: same answers as in-process, deadlines, a dead server,
a new version without a restart."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
import urllib.request

import numpy as np
import pytest
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC, publish

from inference.backends import BackendError, InProcessBackend, get_backend
from inference.duration.features import SHAPE_DIM
from inference.encoders import get_encoder
from inference.model import load_model, point_latest
from inference.model.step import build_inputs
from inference.serving.client import TritonBackend
from inference.serving.policy_call import policy_request
from inference.serving.process import free_ports
from scheduling.gpu_select import select_gpus


def step_inputs(jobs: int = 20, nodes: int = 12):
    return build_inputs(small_snapshot(nodes), pod_mix(jobs), 5.0, SPEC, get_encoder(SPEC.encoder))


def backend(served, **kw) -> TritonBackend:
    kw.setdefault("deadline_ms", 5000)
    return TritonBackend(served.latest, url=served.url, **kw)


def assert_same_as_in_process(served, inputs, out: dict) -> None:
    """Triton's answer equals the in-process backend's on the version that answered, to 1e-5."""
    local = InProcessBackend(loaded=load_model(served.root / out["version"])).policy(inputs)
    assert out["scores"].dtype == np.float32 and out["scores"].shape == local["scores"].shape
    np.testing.assert_allclose(out["scores"], local["scores"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(out["node_part"], local["node_part"], atol=1e-5, rtol=0)


def test_policy_scores_equal_in_process(served):
    inputs = step_inputs()
    b = get_backend("triton", served.latest, url=served.url, deadline_ms=5000)
    assert isinstance(b, TritonBackend)
    out = b.policy(inputs)
    assert out["version"] == b.loaded.version
    assert_same_as_in_process(served, inputs, out)
    assert np.abs(out["scores"]).sum() > 0  # a real answer, not zeros
    b.close()


async def test_policy_async_equals_sync(served):
    inputs = step_inputs()
    b = backend(served)
    out = await b.policy_async(inputs)
    assert_same_as_in_process(served, inputs, out)
    np.testing.assert_array_equal(out["scores"], b.policy(inputs)["scores"])
    b.close()


def test_a_step_without_jobs_and_a_large_one(served):
    b = backend(served)
    empty = build_inputs(small_snapshot(), [], 0.0, SPEC, get_encoder(SPEC.encoder))
    out = b.policy(empty)
    assert out["scores"].shape == (0, 12) and out["node_part"].shape[0] == 12
    big = step_inputs(jobs=300, nodes=400)
    assert_same_as_in_process(served, big, b.policy(big))
    b.close()


def test_a_lean_models_requests_carry_no_pairs_and_agree_step_after_step(served):
    """SPEC has no workload columns: the server computes the pair features from the compact node
    arrays, and keeps them between requests (placements change a few nodes in between)."""
    from inference.features.pair_cache import PairCache
    from inference.serving.models import COMPACT

    snap, pods, cache = small_snapshot(30), pod_mix(80, seed=5), PairCache()
    b = backend(served)
    for step in range(4):
        inputs = build_inputs(snap, pods[step * 10:step * 10 + 40], 5.0, SPEC, get_encoder(SPEC.encoder),
                              pair_cache=cache)  # fmt: skip
        names = {x.name() for x in policy_request(inputs)}
        assert "PAIRS" not in names and set(COMPACT) <= names
        assert_same_as_in_process(served, inputs, b.policy(inputs))
        for j in pods[step * 10:step * 10 + 4]:
            i = int(np.flatnonzero((snap.cpu_free >= j.cpu_milli) & (snap.mem_free >= j.memory_mib))[0])
            gpus = select_gpus(snap, i, j)
            if gpus is not None:
                snap.reserve(i, j, gpus)
    b.close()


async def test_job_encoder_equals_local_encoder(served):
    b = backend(served, encode_deadline_ms=5000)
    texts = ["pod-1 | train resnet", "", "ünïcode jöb | app=x", *[f"job {i}" for i in range(300)]]  # > one chunk
    got = await b.encode_async(texts)
    want = get_encoder(SPEC.encoder).encode(texts)
    assert got.shape == want.shape == (len(texts), SPEC.text_dim)
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_array_equal(b.encode(texts, deadline_ms=5000), got)  # blocking: a window a step opens
    b.close()


async def test_a_deadline_that_cannot_be_met(served):
    # a step the server needs milliseconds for: with a 20 × 12 one, the asynchronous call once returned an
    # answer instead of raising (in a run beside other tests), whatever let it through
    b, step = backend(served, deadline_ms=0.001), step_inputs(jobs=200, nodes=600)
    with pytest.raises(BackendError, match="DEADLINE_EXCEEDED"):
        await b.policy_async(step)
    with pytest.raises(BackendError, match="DEADLINE_EXCEEDED"):
        b.policy(step)
    b.close()
    # what is left of a step's deadline, shorter than the call's own (inference/step_budget.py)
    b = backend(served, deadline_ms=5000, encode_deadline_ms=5000)
    with pytest.raises(BackendError, match="DEADLINE_EXCEEDED after 0.001 ms"):
        b.policy(step, deadline_ms=0.001)
    with pytest.raises(BackendError, match=r"DEADLINE_EXCEEDED after 0.001 ms|out of the step's deadline \(0.001 ms\)"):
        b.encode([f"job {i}" for i in range(200)], deadline_ms=0.001)
    assert b.policy(step, deadline_ms=60_000)["scores"].shape == (200, 600)  # (and a longer one: its own 5 s)
    b.close()


def policy_requests_run(served) -> tuple[float, float]:
    """The policy model's requests run to an answer, and those answered with an error (Triton's metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{served.handle.metrics_port}/metrics", timeout=10).read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(name + r'\{[^}]*model="policy"[^}]*\} (\S+)', text))

    return total("nv_inference_request_success"), total("nv_inference_request_failure")


def test_requests_given_up_on_do_not_run_and_hold_up_the_next_steps(served):
    """A step whose deadline passed is decided by the fallback; its request must not run later on the
    policy model's one instance (found by review: with no queue policy, no request timeout and no check
    in the model, every one of them ran, and the steps after an overload waited behind them). Only a
    request its caller still waited for when it started may run: about one per big step's time."""
    b, big, small = backend(served), step_inputs(jobs=300, nodes=2000), step_inputs()
    alone = float("inf")
    for _ in range(3):  # the quickest of three: a slow first call (a busy machine) set a deadline some met
        started = time.perf_counter()
        b.policy(big)
        alone = min(alone, time.perf_counter() - started)  # ~0.2 s here
    ran0, failed0 = policy_requests_run(served)
    b.deadline_ms, started, missed = alone * 250, time.perf_counter(), 0  # a quarter of what one needs
    for _ in range(12):
        try:
            b.policy(big)
        except BackendError:
            missed += 1
    elapsed = time.perf_counter() - started
    b.deadline_ms = 60_000
    b.policy(small)  # after whatever still runs
    ran, failed = (n - n0 for n, n0 in zip(policy_requests_run(served), (ran0 + 1, failed0), strict=True))
    # (a request whose deadline passed before it left this process never reaches the server: 11 of 12 reached
    # it once, on a loaded machine, in this and in older trees; and a call whose region the server no longer
    # held is sent again by the wire, two requests of one call: 13 in a CI run of 85f809d, 4 run and 9 failed)
    assert missed == 12 and 6 <= ran + failed <= 12 + 3, (ran, failed)
    assert ran <= elapsed / alone + 2, (ran, elapsed, alone)  # before the fix: all 12 ran
    b.close()


async def test_a_stopped_server_raises_instead_of_hanging():
    b = TritonBackend(None, loaded=_tiny(), url=f"127.0.0.1:{free_ports(1)[0]}", deadline_ms=2000)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match="triton policy"):
        b.policy(step_inputs())
    with pytest.raises(BackendError, match="triton policy"):
        await b.policy_async(step_inputs())
    with pytest.raises(BackendError, match="triton job_encoder"):
        await b.encode_async(["x"])
    assert time.monotonic() - t0 < 10
    b.close()


def _tiny():
    import torch

    from inference.model import ModelConfig, Scorer
    from inference.model.io import LoadedModel

    torch.manual_seed(0)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8)).eval()
    return LoadedModel(model, model.config, "local", None)  # type: ignore[arg-type]


async def test_a_server_that_accepts_but_never_answers_misses_the_deadline():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        stop = threading.Event()
        threading.Thread(target=lambda: (listener.accept(), stop.wait(10)), daemon=True).start()
        b = TritonBackend(None, loaded=_tiny(), url=f"127.0.0.1:{listener.getsockname()[1]}", deadline_ms=300)
        t0 = time.monotonic()
        with pytest.raises(BackendError, match="DEADLINE_EXCEEDED"):
            await b.policy_async(step_inputs())
        assert time.monotonic() - t0 < 5
        stop.set()
        b.close()


async def test_a_new_version_is_served_without_a_restart(served):
    b = backend(served)
    inputs = step_inputs()
    before = (await b.policy_async(inputs))["version"]
    publish(served.root, "v2", seed=7)
    try:
        deadline = time.monotonic() + 20
        while (out := await b.policy_async(inputs))["version"] != "v2":
            assert time.monotonic() < deadline, "the server kept answering " + out["version"]
            await asyncio.sleep(0.2)
        assert before != "v2"
        assert b.loaded.version == "v2" and b.refresh() and not b.refresh()  # the local copy followed, once
        assert_same_as_in_process(served, inputs, out)
    finally:  # back to v1, and wait until the server answers with it (the next tests compare versions)
        point_latest(served.root, "v1")  # (v1 is there: versions are written once)
        deadline = time.monotonic() + 20
        while (back := (await b.policy_async(inputs))["version"]) != "v1" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    b.close()
    assert back == "v1", f"the shared server still answers {back} (the tests after this one expect v1)"


async def test_the_predictor_through_triton_says_what_is_absent(served):
    b = backend(served, encode_deadline_ms=5000)
    seconds, source = await b.duration_async(np.zeros((3, 16), np.float32), np.zeros((3, SHAPE_DIM), np.float32))
    assert seconds.shape == (3,) and np.isnan(seconds).all() and source.startswith("absent:")
    h = np.zeros((5, 8), np.float32)
    with pytest.raises(BackendError, match="transition model absent"):
        await b.transition_async(h, np.zeros((2, SPEC.job_dim), np.float32), np.array([0, 1]),
                                 np.zeros((2, SPEC.pair_dim), np.float32))  # fmt: skip
    b.close()


def test_a_job_encoder_answer_from_a_version_with_another_encoder_is_refused(tmp_path):
    """Each stub watches ``latest`` on its own: during a switch the job encoder may answer with another
    version than the worker's. Its vectors are kept only when that version has the same encoder (found by
    review: another encoder's vectors of the same size would have been cached under this one's name)."""
    import dataclasses

    publish(tmp_path, "v1", seed=0)
    publish(tmp_path, "v2", seed=1)  # the same encoder
    publish(tmp_path, "v3", seed=2, spec=dataclasses.replace(SPEC, encoder=f"{SPEC.encoder}-other"))
    point_latest(tmp_path, "v1")
    b = TritonBackend(tmp_path / "latest", url=f"127.0.0.1:{free_ports(1)[0]}")
    b._check_encoder(np.array([[b"v1"]], dtype=np.object_))
    b._check_encoder(np.array([[b"v2"]], dtype=np.object_))
    for version in (b"v3", b"v9"):  # another encoder; a version this worker cannot read
        with pytest.raises(BackendError, match=f"answered with model version {version.decode()}, whose encoder"):
            b._check_encoder(np.array([[version]], dtype=np.object_))
    b.close()
