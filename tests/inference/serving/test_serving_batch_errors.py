"""Requests Triton batches together, one of them malformed, against a real tritonserver
(inference/serving/python_model.py ``execute``): the malformed one gets its own error, the others
their answers, and the server stays up.

Found by review: a batch that raised gave every request of the batch the one error (a good request
batched with a bad one of the same shape was refused with the bad one's message), and when two
failing requests were batched together the second error came back garbled and tritonserver died
with SIGSEGV, so every later call of every worker failed."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC
from tritonclient.utils import InferenceServerException

from inference.encoders import get_encoder
from inference.model.step import build_inputs
from inference.serving.policy_call import check_policy, make_inputs, parse_answer, policy_arrays

INPUTS = build_inputs(small_snapshot(12), pod_mix(20), 5.0, SPEC, get_encoder(SPEC.encoder))


def arrays(bad: bool) -> dict[str, np.ndarray]:
    a = {name: value.copy() for name, value in policy_arrays(INPUTS).items()}
    if bad:
        a["WHICH"][:] = 10_000  # rows of PAIRS that do not exist: the model refuses the request
    return a


async def test_a_malformed_request_batched_with_others_fails_alone_and_the_server_stays_up(served):
    client = grpcclient.InferenceServerClient(served.url)
    good, bad = arrays(False), arrays(True)
    try:
        for _ in range(8):  # same-shaped requests at once: Triton's dynamic batcher puts them in one batch
            answers = await asyncio.gather(*(client.infer("policy", make_inputs(x)) for x in (bad, good, bad, good)),
                                           return_exceptions=True)  # fmt: skip
            for k in (0, 2):
                assert isinstance(answers[k], InferenceServerException), answers[k]
                assert "'which' points outside 'pairs'" in str(answers[k]), str(answers[k])
            for k in (1, 3):
                assert not isinstance(answers[k], BaseException), answers[k]
                assert check_policy(parse_answer(answers[k], "policy"), INPUTS)["scores"].shape == (20, 12)
        assert await client.is_server_live() and await client.is_model_ready("policy")
    finally:
        await client.close()


def test_the_helper_really_breaks_the_request() -> None:
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(arrays(True)["WHICH"], arrays(False)["WHICH"])


@pytest.mark.parametrize("index", [100_000_000, -7])
async def test_a_request_whose_topology_points_outside_its_nodes_is_refused_and_the_stub_lives(served, index):
    """Found by review: a neighbour index out of range (from a client bug, or anyone who reaches the port)
    crashed the policy model's stub (SIGSEGV in a sparse matrix built unchecked); every later request
    failed while Triton still said the model was ready."""
    client = grpcclient.InferenceServerClient(served.url)
    bad = arrays(False)
    name = "NEIGHBOURS" if bad["NEIGHBOURS"].size else "GROUPS"
    bad[name].reshape(-1)[0] = index
    try:
        with pytest.raises(InferenceServerException, match=f"'{name.lower()}' points outside the 12 nodes"):
            await client.infer("policy", make_inputs(bad))
        answer = await client.infer("policy", make_inputs(arrays(False)))
        assert check_policy(parse_answer(answer, "policy"), INPUTS)["scores"].shape == (20, 12)
    finally:
        await client.close()
