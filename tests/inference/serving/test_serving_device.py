"""``semsched serve --device`` reaches the three Triton models: ``policy`` and ``predictor`` run the
host's scorer on the chosen device (new versions too), ``job_encoder`` gets the same device; the
worker's own copies stay on CPU."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import torch
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC, publish

from inference.encoders import get_encoder
from inference.model import load_model
from inference.model.io import model_device, reload_if_moved
from inference.model.step import build_inputs, run_policy
from inference.serving.client import TritonBackend
from inference.serving.host import ModelHost, pick_device
from inference.serving.models import to_wire, unpack_scores
from inference.serving.predictor import rollout
from inference.serving.server import ServeOptions, make_models

CUDA = torch.cuda.is_available()


def inputs_for(jobs: int):
    return build_inputs(small_snapshot(), pod_mix(jobs), 1.0, SPEC, get_encoder(SPEC.encoder))


def transition_request(h: np.ndarray, k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"H": h[None], "ACTION_JOB": rng.normal(size=(1, k, SPEC.job_dim)).astype(np.float32),
            "ACTION_NODE": rng.integers(0, len(h), size=(1, k)),
            "ACTION_PAIR": rng.normal(size=(1, k, SPEC.pair_dim)).astype(np.float32)}  # fmt: skip


def models_on(tmp_path, requested: str, **config):
    publish(tmp_path, "v1", seed=5, **config)
    return make_models(ServeOptions(model_dir=tmp_path / "latest", watch_s=0.0), pick_device(requested))


def test_auto_is_cuda_only_where_torch_sees_a_gpu_and_cuda_without_one_falls_back_to_cpu(caplog):
    assert pick_device("auto") == ("cuda" if CUDA else "cpu")
    assert pick_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="auto, cpu or cuda"):
        pick_device("gpu")
    if not CUDA:
        with caplog.at_level(logging.WARNING, logger="semsched.serving"):
            assert pick_device("cuda") == "cpu"
        assert "no GPU" in caplog.text and "using cpu" in caplog.text


@pytest.mark.skipif(CUDA, reason="torch sees a GPU here")
def test_a_gpu_torch_lists_but_cannot_run_on_falls_back_to_cpu(caplog, monkeypatch):
    """Found by review: torch lists a GPU it has no kernels for (a wheel built for other architectures), the
    first CUDA op failed in the models' stubs and the server exited. Stood in here by a torch that says it
    sees a GPU on a machine without one: its first op on it fails the same way."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for requested in ("auto", "cuda"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="semsched.serving"):
            assert pick_device(requested) == "cpu"
        assert "torch sees a GPU but cannot run on it" in caplog.text and "using cpu" in caplog.text


@pytest.mark.skipif(CUDA, reason="torch sees a GPU here")
def test_auto_warns_when_a_gpu_was_given_but_torch_sees_none(caplog, monkeypatch):
    """The compose service reserves a GPU and serves with --device auto: a torch that cannot use it
    (a CPU-only wheel, an old driver) said so in one INFO line only (found by review)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    with caplog.at_level(logging.WARNING, logger="semsched.serving"):
        assert pick_device("auto") == "cpu"
    assert not caplog.records  # no GPU given: CPU is what was meant
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    with caplog.at_level(logging.WARNING, logger="semsched.serving"):
        assert pick_device("auto") == "cpu"
    assert "NVIDIA_VISIBLE_DEVICES=all" in caplog.text and "torch sees none" in caplog.text


@pytest.mark.parametrize("requested", ["cpu", "auto"])
def test_the_chosen_device_reaches_all_three_models_and_the_log_says_so(tmp_path, requested):
    want = torch.device("cuda" if requested == "auto" and CUDA else "cpu")
    models = models_on(tmp_path, requested, transition=True)
    # one host behind all three: policy and predictor run its scorer, job_encoder gets the same device
    assert models.policy.host is models.host and models.predictor.host is models.host
    assert model_device(models.host.loaded) == want and torch.device(models.encoder.device) == want
    described = models.describe()
    assert f"torch on {want.type}" in described["policy"]
    assert f"on {want.type}" in described["job_encoder"]
    assert f"transition of v1 on {want.type}" in described["predictor"]
    # and they answer from there: the policy's scores equal the same model's on CPU in this process
    x = inputs_for(4)
    (answer,) = models.policy([{k: v[None] for k, v in to_wire(x).items()}])
    scores = unpack_scores({"scores_fit": answer["SCORES_FIT"][0]}, x)["scores"]
    cpu = load_model(tmp_path / "latest")
    np.testing.assert_allclose(scores, run_policy(cpu.model, x)["scores"], atol=1e-5)
    rng = np.random.default_rng(2)
    h = rng.normal(size=(5, 8)).astype(np.float32)
    req = transition_request(h, 2, rng)
    (t,) = models.predictor([req])
    want_h = rollout(cpu.model, h, req["ACTION_JOB"][0], req["ACTION_NODE"][0], req["ACTION_PAIR"][0])
    np.testing.assert_allclose(t["H_NEXT"][0], want_h, atol=1e-5)


def test_a_version_published_later_is_loaded_on_the_hosts_device(tmp_path):
    """The hot swap keeps the device. ``meta`` is a torch device every machine has, unlike CUDA: a
    host on it shows that a swapped-in version is loaded where the host runs, not on CPU."""
    publish(tmp_path, "v1", seed=1)
    host = ModelHost(tmp_path / "latest", watch_s=0.0, device="meta")
    assert model_device(host.loaded).type == "meta"
    publish(tmp_path, "v2", seed=2)
    assert host.current().version == "v2" and host.swaps == 1
    assert model_device(host.loaded).type == "meta"


def test_the_workers_own_copy_stays_on_cpu(tmp_path):
    """The Triton client's local copy (in-step re-scoring) loads on CPU whatever the server runs on."""
    publish(tmp_path, "v1", seed=1)
    backend = TritonBackend(tmp_path / "latest", url="localhost:1")  # (connects only when asked)
    assert model_device(backend.loaded).type == "cpu"
    # a reload follows the current copy's device unless told otherwise
    publish(tmp_path, "v2", seed=2)
    fresh = reload_if_moved(tmp_path / "latest", backend.loaded)
    assert fresh is not None and fresh.version == "v2" and model_device(fresh).type == "cpu"
    assert model_device(reload_if_moved(tmp_path / "latest", backend.loaded, "meta")).type == "meta"


@pytest.mark.skipif(not CUDA, reason="needs a GPU torch sees")
def test_on_cuda_the_policy_scores_equal_cpu(tmp_path):
    models = models_on(tmp_path, "cuda")
    assert model_device(models.host.loaded).type == "cuda"
    cpu = load_model(tmp_path / "latest")
    for jobs in (0, 3, 40):
        x = inputs_for(jobs)
        (answer,) = models.policy([{k: v[None] for k, v in to_wire(x).items()}])
        want = run_policy(cpu.model, x)
        np.testing.assert_allclose(answer["NODE_PART"][0], want["node_part"], atol=1e-5)
        if jobs:
            got = unpack_scores({"scores_fit": answer["SCORES_FIT"][0]}, x)["scores"]
            np.testing.assert_allclose(got, want["scores"], atol=1e-5)
    publish(tmp_path, "v2", seed=6)
    assert models.host.current().version == "v2" and model_device(models.host.loaded).type == "cuda"


def test_the_running_server_logs_its_three_models_on_the_device_it_was_given(served):
    """The session's tritonserver was started with ``device="cpu"``."""
    lines: list[str] = []
    for _ in range(100):  # the server logs its models just after it turns ready
        lines = [ln for ln in served.handle.log_tail(400).splitlines() if " model " in ln]
        if len(lines) >= 3:
            break
        time.sleep(0.1)
    text = "\n".join(lines)
    assert "model policy" in text and "torch on cpu" in text, served.handle.log_tail()
    assert f"encoder {SPEC.encoder} on cpu" in text
    assert "model predictor" in text
