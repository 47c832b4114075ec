"""A model with FGD's workload columns, served by its own real tritonserver: its requests carry the
pair features (the server cannot compute FGD's whole-cluster columns from the compact node arrays),
and its answers equal the in-process backend's."""

from __future__ import annotations

import numpy as np
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import FRAG_SPEC, publish

from inference.backends import get_backend
from inference.model.step import build_inputs
from inference.serving.client import policy_request
from inference.serving.models import COMPACT


def test_a_frag_models_requests_carry_pairs_and_agree_with_in_process(tmp_path):
    from inference.serving.process import start_server

    latest = publish(tmp_path / "models", "frag-v1", seed=5, spec=FRAG_SPEC)
    local = get_backend("in-process", latest)
    inputs = build_inputs(small_snapshot(), pod_mix(15), 0.0, FRAG_SPEC, local._encoder)
    assert inputs.source is None and inputs.pairs.shape[2] == FRAG_SPEC.pair_dim
    names = {x.name() for x in policy_request(inputs)}
    assert "PAIRS" in names and not set(COMPACT) & names
    with start_server(latest, log_path=tmp_path / "server.log") as server:
        triton = get_backend("triton", latest, url=server.url, deadline_ms=5000)
        got = triton.policy(inputs)
        triton.close()
    want = local.policy(inputs)
    assert got["version"] == "frag-v1"
    for name in ("scores", "node_part"):
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-5, err_msg=name)
