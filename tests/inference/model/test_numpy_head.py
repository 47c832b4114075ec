"""The numpy mirror of the policy head (in-step re-scoring) scores as the torch head does."""

import numpy as np
import pytest
import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer
from inference.model.numpy_head import numpy_head
from inference.model.step import score_nodes

SPEC = FeatureSpec(gpu_models=("A10", "T4"), text_dim=8, encoder="hashed-ngram-8")


@pytest.mark.parametrize("rank", [0, 3])
@pytest.mark.parametrize("layers", [1, 2])
def test_numpy_head_scores_as_the_torch_head(rank, layers):
    torch.manual_seed(rank * 10 + layers)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_layers=layers, head_rank=rank)).eval()
    fast = numpy_head(model.head)
    assert fast is not None and fast.factored == bool(rank)
    rng = np.random.default_rng(0)
    for m in (1, 3, 40):
        part = rng.normal(size=(m, model.head.node.out_features)).astype(np.float32)
        job = rng.normal(size=SPEC.job_dim).astype(np.float32)
        pairs = rng.normal(size=(m, SPEC.pair_dim)).astype(np.float32)
        with torch.inference_mode():
            want = model.head.score(torch.from_numpy(part), torch.from_numpy(job), torch.from_numpy(pairs)).numpy()
        got = score_nodes(model, part, job, pairs)  # the in-step path takes the mirror
        assert got.dtype == np.float32 and got.shape == (m,)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_numpy_head_sees_in_place_weight_updates():
    """Its weights are views of the parameters: an optimiser step or load_state_dict shows at once."""
    torch.manual_seed(0)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2))
    other = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2))
    part = np.ones((2, model.head.node.out_features), np.float32)
    job, pairs = np.full(SPEC.job_dim, 0.5, np.float32), np.full((2, SPEC.pair_dim), 0.25, np.float32)
    before = numpy_head(model.head).score(part, job, pairs)
    model.load_state_dict(other.state_dict())
    after = numpy_head(model.head).score(part, job, pairs)
    with torch.inference_mode():
        want = other.head.score(torch.from_numpy(part), torch.from_numpy(job), torch.from_numpy(pairs)).numpy()
    np.testing.assert_allclose(after, want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(before, after)


def test_a_head_it_does_not_mirror_stays_on_torch():
    torch.manual_seed(0)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2))
    model.head.out.append(torch.nn.Tanh())  # a layer the mirror does not know
    assert numpy_head(model.head) is None
    part = np.ones((2, model.head.node.out_features), np.float32)
    job, pairs = np.zeros(SPEC.job_dim, np.float32), np.zeros((2, SPEC.pair_dim), np.float32)
    with torch.inference_mode():
        want = model.head.score(torch.from_numpy(part), torch.from_numpy(job), torch.from_numpy(pairs)).numpy()
    np.testing.assert_allclose(score_nodes(model, part, job, pairs), want, rtol=1e-6)


def test_a_parameter_given_new_memory_is_noticed():
    """``.to()`` or ``load_state_dict(assign=True)`` give the parameters new memory: the mirror's
    views are made again rather than reading the old weights."""
    torch.manual_seed(0)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2))
    other = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2))
    part = np.ones((2, model.head.node.out_features), np.float32)
    job, pairs = np.full(SPEC.job_dim, 0.5, np.float32), np.full((2, SPEC.pair_dim), 0.25, np.float32)

    def torch_scores(m):  # type: ignore[no-untyped-def]
        with torch.inference_mode():
            return m.head.score(torch.from_numpy(part), torch.from_numpy(job), torch.from_numpy(pairs)).numpy()

    score_nodes(model, part, job, pairs)  # the mirror is made
    model.load_state_dict(other.state_dict(), assign=True)
    np.testing.assert_allclose(score_nodes(model, part, job, pairs), torch_scores(other), rtol=1e-5, atol=1e-5)
    model.to(torch.float64)
    with torch.no_grad():
        model.head.pair.weight.mul_(-1.0)
    model.to(torch.float32)
    np.testing.assert_allclose(score_nodes(model, part, job, pairs), torch_scores(model), rtol=1e-5, atol=1e-5)


def _count_calls(monkeypatch, cls, name: str) -> list[int]:  # type: ignore[no-untyped-def]
    """A list that grows by one at each call of ``cls.name`` (still called through)."""
    calls: list[int] = []
    method = getattr(cls, name)

    def spy(self, *a):  # type: ignore[no-untyped-def]
        calls.append(1)
        return method(self, *a)

    monkeypatch.setattr(cls, name, spy)
    return calls


def test_the_in_step_path_takes_the_mirror_unless_the_model_damps_churn(monkeypatch):
    from inference.model.numpy_head import NumpyHead

    calls = _count_calls(monkeypatch, NumpyHead, "score")
    torch.manual_seed(0)
    part = np.ones((2, 6), np.float32)
    job, pairs = np.zeros(SPEC.job_dim, np.float32), np.zeros((2, SPEC.pair_dim), np.float32)
    plain = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2))
    score_nodes(plain, part, job, pairs)
    assert calls == [1]
    damped = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2, transition=True, stability=0.5))
    score_nodes(damped, part, job, pairs, np.zeros((2, 8), np.float32))
    assert calls == [1]  # Δ needs the transition head: torch


def test_numpy_cost_mirrors_the_cost_head_and_cost_at_takes_it(monkeypatch):
    """ψ at a node outside the answer's best-scored ones (the decision record) runs in numpy: the
    same costs as the torch head; a cost head with a layer it does not know stays on torch."""
    from inference.model.numpy_head import NumpyCostHead, numpy_cost
    from inference.model.step import cost_at

    calls = _count_calls(monkeypatch, NumpyCostHead, "cost")
    torch.manual_seed(4)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2, cost_dim=2)).eval()
    assert numpy_head(model.cost_head) is None  # asked for as the wrong kind first: not a policy head
    fast = numpy_cost(model.cost_head)
    assert fast is not None and numpy_cost(None) is None
    rng = np.random.default_rng(1)
    part = rng.normal(size=(5, model.head.node.out_features)).astype(np.float32)
    job = rng.normal(size=SPEC.job_dim).astype(np.float32)
    pairs = rng.normal(size=(5, SPEC.pair_dim)).astype(np.float32)
    with torch.inference_mode():
        want = model.cost(torch.from_numpy(part), torch.from_numpy(job), torch.from_numpy(pairs)).numpy()
    got = fast.cost(part, job, pairs)
    assert got.dtype == np.float32 and got.shape == (5, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    calls.clear()
    np.testing.assert_allclose(cost_at(model, part[3], job, pairs[3]), want[3], rtol=1e-5, atol=1e-6)
    assert calls == [1]  # cost_at took the mirror
    other = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2, cost_dim=2)).eval()
    other.cost_head.out.append(torch.nn.Tanh())  # a layer the mirror does not know: torch answers
    assert numpy_cost(other.cost_head) is None
    with torch.inference_mode():
        squashed = other.cost(torch.from_numpy(part), torch.from_numpy(job), torch.from_numpy(pairs)).numpy()
    np.testing.assert_allclose(cost_at(other, part[3], job, pairs[3]), squashed[3], rtol=1e-5, atol=1e-6)
    assert calls == [1]  # … and torch answered for the head it does not mirror
