"""A model with FGD's workload columns, served by its own real tritonserver: its requests carry the
compact node arrays with the nodes' GPU models and health (the server computes FGD's columns,
the whole-cluster tie set included, with its own pair cache), and its answers equal the
in-process backend's, step after step; PAIRS still works."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from inference_helpers import job, pod_mix, small_snapshot
from serving_helpers import FRAG_SPEC, publish

from inference.backends import get_backend
from inference.features.pair_cache import PairCache
from inference.model.step import build_inputs
from inference.serving.models import COMPACT, COMPACT_FGD
from inference.serving.policy_call import policy_request
from scheduling.gpu_select import select_gpus

pytestmark = pytest.mark.integration  # its own real tritonserver


def test_a_frag_models_compact_requests_agree_with_in_process_step_after_step(tmp_path):
    from inference.serving.process import start_server

    latest = publish(tmp_path / "models", "frag-v1", seed=5, spec=FRAG_SPEC)
    local = get_backend("in-process", latest)
    snap, cache = small_snapshot(20), PairCache()
    pods = [*pod_mix(60, seed=2), job("t4-only", gpus=1, per=500, gpu_models=frozenset({"T4"})),
            job("absent-model", gpus=1, per=1000, gpu_models=frozenset({"H100"}))]  # fmt: skip
    with start_server(latest, log_path=tmp_path / "server.log") as server:
        triton = get_backend("triton", latest, url=server.url, deadline_ms=5000)
        for step in range(4):
            jobs = [*pods[step * 12:step * 12 + 24], *pods[-2:]]
            inputs = build_inputs(snap, jobs, 0.0, FRAG_SPEC, local._encoder, pair_cache=cache)
            names = {x.name() for x in policy_request(inputs)}
            assert "PAIRS" not in names and set(COMPACT) | set(COMPACT_FGD) <= names
            got, want = triton.policy(inputs), local.policy(inputs)
            assert got["version"] == "frag-v1"
            for name in ("scores", "node_part"):
                np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-5, err_msg=f"{name}, step {step}")
            for j in pods[step * 12:step * 12 + 5]:  # placements and a health flip change FGD's columns
                i = int(np.flatnonzero((snap.cpu_free >= j.cpu_milli) & (snap.mem_free >= j.memory_mib))[step % 3])
                if (gpus := select_gpus(snap, i, j)) is not None:
                    snap.reserve(i, j, gpus)
            snap.set_healthy(step, False)
        full = replace(inputs, source=None)  # the client's PAIRS, as before
        assert "PAIRS" in {x.name() for x in policy_request(full)}
        np.testing.assert_allclose(triton.policy(full)["scores"], local.policy(full)["scores"], rtol=0, atol=1e-5)
        triton.close()
