"""ψ at one (job, node) for the decision record (:func:`inference.model.step.cost_at`)."""

import warnings

import numpy as np
import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer
from inference.model.step import cost_at

SPEC = FeatureSpec(gpu_models=("A10", "T4"), text_dim=8, encoder="hashed-ngram-8")


def test_cost_at_takes_read_only_arrays_as_a_triton_answer_gives_them_without_a_torch_warning():
    """A Triton answer's arrays are read-only buffers; torch.from_numpy on them warned in the worker's
    log ("The given NumPy array is not writable … undefined behavior") at the first decision record."""
    torch.manual_seed(0)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=2, cost_dim=2)).eval()
    rng = np.random.default_rng(0)
    part = rng.normal(size=model.head.node.out_features).astype(np.float32)
    job = rng.normal(size=SPEC.job_dim).astype(np.float32)
    pair = rng.normal(size=SPEC.pair_dim).astype(np.float32)
    want = cost_at(model, part, job, pair)
    for a in (part, job, pair):
        a.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cost_at(model, part, job, pair)
    assert got.shape == (2,) and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    with torch.inference_mode():
        direct = model.cost(torch.tensor(part)[None], torch.tensor(job), torch.tensor(pair)[None])[0].numpy()
    np.testing.assert_allclose(got, direct, rtol=1e-6)
