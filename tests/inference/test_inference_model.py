import numpy as np
import pytest
import torch

from inference.features.spec import FeatureSpec
from inference.features.topology import Topology, knn
from inference.model import ModelConfig, Scorer, TorchTopology


def test_knn_aggregate_is_the_neighbour_mean_with_and_without_grad():
    nbr = knn(np.random.default_rng(0).random((40, 3)), 5)
    topo = TorchTopology(Topology("knn", None, nbr))
    h = torch.rand(2, 40, 6, requires_grad=True)
    ref = h[:, torch.as_tensor(nbr)].mean(dim=2)
    out = topo.aggregate(h)
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    assert h.grad is not None and h.grad.shape == h.shape
    with torch.inference_mode():
        torch.testing.assert_close(topo.aggregate(h.detach()), ref.detach())


def test_group_aggregate_is_the_group_mean():
    groups = np.array([0, 0, 1, 1, 1, 2])
    topo = TorchTopology(Topology("labels", groups, None))
    h = torch.arange(6, dtype=torch.float32).reshape(1, 6, 1)
    assert topo.aggregate(h)[0, :, 0].tolist() == [0.5, 0.5, 3.0, 3.0, 3.0, 5.0]


@pytest.mark.parametrize("depth", [2, 10])
def test_scorer_shapes(depth):
    spec = FeatureSpec(gpu_models=("A10",), text_dim=8, encoder="hashed-ngram-8")
    model = Scorer(ModelConfig(spec=spec, hidden=8, depth=depth, knn=3))
    topo = TorchTopology(Topology("knn", None, knn(np.random.default_rng(1).random((20, 3)), 3)))
    out = model(torch.rand(4, 20, spec.node_dim), topo, torch.zeros(4, spec.job_dim), torch.rand(4, spec.job_dim),
                torch.rand(4, 20, spec.pair_dim))  # fmt: skip
    assert out.shape == (4, 20) and torch.isfinite(out).all()
    with pytest.raises(ValueError):
        ModelConfig(spec=spec, depth=11)
