"""The pending jobs as tokens of the fusion encoder (inference.model.job_tokens)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from inference_helpers import pod_mix, small_snapshot

from inference.encoders import EncoderCache, HashedNgramEncoder
from inference.features.spec import FeatureSpec
from inference.features.topology import Topology, knn
from inference.model import ModelConfig, Scorer, TorchTopology
from inference.model.step import build_inputs, encode_step, run_policy
from inference.training.imitation import token_windows

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=8, encoder="hashed-ngram-8")


def _model(slots: int = 3, seed: int = 0, woken: bool = True) -> Scorer:
    """A scorer with job tokens; ``woken``: their attention's output projection made non-zero (it
    starts at zero, so an untrained model does not read the tokens yet)."""
    torch.manual_seed(seed)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, knn=3, job_tokens=slots)).eval()
    if woken:
        for layer in model.encoder.layers:
            torch.nn.init.normal_(layer.attend.out.weight, std=0.5)
    return model


def _state(n: int = 20) -> tuple[torch.Tensor, TorchTopology, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    topo = TorchTopology(Topology("knn", None, knn(np.random.default_rng(1).random((n, 3)), 3)))
    return torch.rand(1, n, SPEC.node_dim, generator=g), topo, torch.zeros(1, SPEC.job_dim)


def test_config_bounds_and_old_configs_load_without_tokens():
    with pytest.raises(ValueError, match="job_tokens"):
        ModelConfig(spec=SPEC, job_tokens=17)
    old = ModelConfig(spec=SPEC).to_json()
    del old["job_tokens"]  # a config.json written before job tokens existed
    config = ModelConfig.from_json(json.loads(json.dumps(old)))
    assert config.job_tokens == 0 and Scorer(config).encoder.tokens is None


def test_a_new_model_starts_without_reading_the_tokens_then_reads_them():
    nodes, topo, queue = _state()
    a, b = torch.rand(1, 5, SPEC.job_dim), torch.rand(1, 7, SPEC.job_dim)
    with torch.no_grad():
        fresh = _model(woken=False)
        torch.testing.assert_close(fresh.encode(nodes, topo, queue, a), fresh.encode(nodes, topo, queue, b))
        woken = _model()
        assert not torch.allclose(woken.encode(nodes, topo, queue, a), woken.encode(nodes, topo, queue, b))


def test_tokens_are_a_set_padding_is_masked_and_no_jobs_is_the_empty_set():
    model = _model()
    nodes, topo, queue = _state()
    jobs = torch.rand(1, 6, SPEC.job_dim)
    with torch.no_grad():
        h = model.encode(nodes, topo, queue, jobs)
        torch.testing.assert_close(model.encode(nodes, topo, queue, jobs[:, torch.randperm(6)]), h)
        padded = torch.cat([jobs, torch.rand(1, 3, SPEC.job_dim)], dim=1)
        mask = torch.tensor([[True] * 6 + [False] * 3])
        torch.testing.assert_close(model.encode(nodes, topo, queue, padded, mask), h)
        empty = model.encode(nodes, topo, queue, torch.zeros(1, 0, SPEC.job_dim))
        assert torch.isfinite(empty).all()
        torch.testing.assert_close(model.encode(nodes, topo, queue), empty)
        all_padding = model.encode(nodes, topo, queue, padded, torch.zeros(1, 9, dtype=torch.bool))
        torch.testing.assert_close(all_padding, empty)


def test_a_jobs_scores_in_a_step_depend_on_the_other_pending_jobs():
    """The head scores each job alone; with tokens, h (and so every score) reads the whole queue."""
    snap, encoder, jobs = small_snapshot(), EncoderCache(HashedNgramEncoder(8)), pod_mix(6)

    def scores(model: Scorer, pending: list) -> np.ndarray:
        inputs = build_inputs(snap, pending, 0.0, SPEC, encoder, knn=3)
        return run_policy(model, inputs)["scores"][0]

    with_tokens, without = _model(), Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, knn=3)).eval()
    assert not np.allclose(scores(with_tokens, jobs[:1]), scores(with_tokens, jobs), atol=1e-6)
    finite = np.isfinite(scores(without, jobs))
    np.testing.assert_allclose(scores(without, jobs[:1])[finite], scores(without, jobs)[finite], rtol=1e-5)
    # encode_step (the lookahead's h_0, the predictor's) reads the same tokens as run_policy
    inputs = build_inputs(snap, jobs, 0.0, SPEC, encoder, knn=3)
    with torch.inference_mode():
        part = with_tokens.head.precompute(encode_step(with_tokens, inputs)).numpy()
    np.testing.assert_allclose(part, run_policy(with_tokens, inputs)["node_part"], rtol=1e-5, atol=1e-6)


def test_token_windows_take_the_next_states_of_the_same_run():
    idx, mask = token_windows(np.array([0, 0, 0, 1, 1]), 3, seed=None)
    assert idx.tolist() == [[0, 1, 2], [1, 2, 1], [2, 2, 2], [3, 4, 3], [4, 4, 4]]
    assert mask.tolist() == [[True, True, True], [True, True, False], [True, False, False],
                             [True, True, False], [True, False, False]]  # fmt: skip


def test_token_windows_vary_in_length_from_one_job_to_the_whole_window():
    group = np.zeros(400, dtype=np.int64)
    idx, mask = token_windows(group, 8, seed=3)
    lengths = mask.sum(1)[:-8]  # away from the run's end
    assert mask[:, 0].all() and (idx[:, 0] == np.arange(400)).all()  # a state's own job always
    assert lengths.min() == 1 and lengths.max() == 8 and len(set(lengths.tolist())) == 8
    assert (mask == (np.arange(8)[None, :] < mask.sum(1)[:, None])).all()  # a prefix: the next states in order
    again, _ = token_windows(group, 8, seed=3)
    assert (again == idx).all()


def test_slot_attention_is_the_textbook_attention_with_its_products_regrouped():
    """``SlotAttention`` computes ``h + O(softmax(Q·h (K·s)ᵀ / √H) V·s)`` (bias of O included) with
    its products grouped differently: the same values, for a batch of states."""
    from inference.model.job_tokens import SlotAttention

    torch.manual_seed(3)
    attend = SlotAttention(8)
    torch.nn.init.normal_(attend.out.weight, std=0.5)  # (starts at zero)
    torch.nn.init.normal_(attend.out.bias, std=0.5)
    h, slots = torch.randn(2, 30, 8), torch.randn(2, 3, 8)
    with torch.no_grad():
        weights = torch.softmax(attend.q(h) @ attend.k(slots).transpose(1, 2) / 8**0.5, dim=-1)  # [B, N, S]
        textbook = h + attend.out(weights @ attend.v(slots))
        torch.testing.assert_close(attend(h, slots), textbook)
        one = slots[:1]  # one set of slots for both states broadcasts, as the textbook's products do
        weights = torch.softmax(attend.q(h) @ attend.k(one).transpose(1, 2) / 8**0.5, dim=-1)
        torch.testing.assert_close(attend(h, one), h + attend.out(weights @ attend.v(one)))
