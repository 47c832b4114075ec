"""The client's check of a policy answer (inference/serving/policy_call.py ``check_policy``): an
answer that does not fit the request is a BackendError (the step falls back and says so), never
an exception later in the step (found by review: a cost estimate of the wrong shape passed, and
the decision record's ψ lookup raised inside the worker's step, at every step)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC

from inference.backends import BackendError, InProcessBackend
from inference.encoders import get_encoder
from inference.model import ModelConfig, Scorer, save_model
from inference.model.io import load_model
from inference.model.step import build_inputs
from inference.serving.policy_call import check_policy


@pytest.fixture(scope="module")
def answered(tmp_path_factory):
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("m")
    config = ModelConfig(spec=SPEC, hidden=8, depth=2, cost_dim=2, transition=True)
    loaded = load_model(save_model(root / "v", Scorer(config), "v"))
    inputs = build_inputs(small_snapshot(12), pod_mix(10), 5.0, SPEC, get_encoder(SPEC.encoder))
    return inputs, InProcessBackend(loaded=loaded).policy(inputs)


def test_an_answer_that_fits_the_request_passes(answered):
    inputs, out = answered
    got = check_policy(dict(out), inputs)
    assert got["scores"].shape == (10, 12) and got["cost"].shape[:2] == got["cost_nodes"].shape


@pytest.mark.parametrize(("name", "broken"), [
    ("scores", lambda v: v[:, :-1]),
    ("cost", lambda v: v[:, :, 0]),  # a rank lost
    ("cost", lambda v: v[:-1]),  # a job short
    ("cost_nodes", lambda v: v + 100),  # nodes that are not in the request
    ("cost_nodes", lambda v: v[:, :-1]),
])  # fmt: skip
def test_an_answer_that_does_not_fit_the_request_is_a_backend_error(answered, name, broken):
    inputs, out = answered
    bad = dict(out) | {name: broken(np.asarray(out[name]))}
    with pytest.raises(BackendError, match="malformed"):
        check_policy(bad, inputs)


def test_a_cost_without_its_nodes_is_a_backend_error(answered):
    inputs, out = answered
    with pytest.raises(BackendError, match="malformed"):
        check_policy({k: v for k, v in out.items() if k != "cost_nodes"}, inputs)


def test_an_empty_steps_answer_keeps_its_per_node_outputs(tmp_path):
    """A step without jobs, from a model that damps churn (it answers ``h``, per node): found by review,
    the client cut ``h`` to ``[0, H]`` with the per-job outputs' dummy row, unlike the in-process answer."""
    from serving_helpers import publish

    from inference.model.step import run_policy
    from inference.serving.host import ModelHost
    from inference.serving.models import PolicyModel, to_wire

    latest = publish(tmp_path / "models", "v1", seed=0, stability=0.5, transition=True, cost_dim=2)
    inputs = build_inputs(small_snapshot(12), pod_mix(0), 5.0, SPEC, get_encoder(SPEC.encoder))
    local = run_policy(load_model(latest).model, inputs)
    answer = PolicyModel(ModelHost(latest))([{k: v[None] for k, v in to_wire(inputs).items()}])[0]
    got = check_policy({k.lower(): v[0] for k, v in answer.items() if k != "VERSION"} | {"version": "v1"}, inputs)
    assert local["h"].shape == (12, 8)
    for key in ("scores", "node_part", "h", "delta", "cost", "cost_nodes"):
        assert got[key].shape == local[key].shape, key
    np.testing.assert_allclose(got["h"], local["h"], atol=1e-5, rtol=0)
