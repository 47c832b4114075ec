"""A model with the cost estimator, the self-correction term, the shape-factored policy head and
job tokens, served by its own real tritonserver: every output (scores with Δ subtracted, ψ on each job's best nodes and their
indices, Δ, h) equals the in-process backend's."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC, publish

from inference.backends import get_backend
from inference.model.step import build_inputs

pytestmark = pytest.mark.integration  # its own real tritonserver


def test_cost_and_delta_outputs_equal_in_process(tmp_path):
    from inference.serving.process import start_server

    latest = publish(tmp_path / "models", "heads-v1", seed=3, cost_dim=2, transition=True, stability=0.3,
                     head_rank=3, job_tokens=2)
    with start_server(latest, log_path=tmp_path / "server.log") as server:
        triton = get_backend("triton", latest, url=server.url, deadline_ms=5000)
        local = get_backend("in-process", latest)
        inputs = build_inputs(small_snapshot(), pod_mix(9), 0.0, SPEC, local._encoder)
        got = asyncio.run(triton.policy_async(inputs))
        # a version without those heads cannot be swapped into the bound outputs: the server keeps
        # serving heads-v1 (and says why in its log) instead of failing every call
        publish(tmp_path / "models", "plain-v2", seed=4)
        time.sleep(1.5)  # > the server's watch interval (0.5 s)
        again = asyncio.run(triton.policy_async(inputs))
        triton.close()
        assert again["version"] == "heads-v1" and "cost" in again
        assert "outputs" in (tmp_path / "server.log").read_text()
    want = local.policy(inputs)
    assert {"cost", "cost_nodes", "delta", "h"} <= set(want)
    # ψ is served for each job's best-scored nodes; this cluster has three nodes of each kind, whose
    # tied scores topk may order either way (it did, between the server and this process, on a
    # loaded machine): the same top scores, and the same ψ on every (job, node) both computed
    top = [np.sort(np.take_along_axis(out["scores"], out["cost_nodes"], axis=1), axis=1) for out in (got, want)]
    np.testing.assert_allclose(top[0], top[1], rtol=1e-5, atol=1e-6)
    both = 0
    for i in range(len(want["cost_nodes"])):
        where = {int(n): k for k, n in enumerate(got["cost_nodes"][i])}
        for k, n in enumerate(want["cost_nodes"][i]):
            if int(n) in where:
                both += 1
                np.testing.assert_allclose(got["cost"][i, where[int(n)]], want["cost"][i, k], rtol=1e-5, atol=1e-6)
    assert both >= want["cost_nodes"].size // 2
    for name in ("scores", "node_part", "delta", "h"):
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert got["version"] == "heads-v1"
