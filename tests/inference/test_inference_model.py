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


def test_shape_factored_head_scores_a_step_as_it_scores_each_job():
    """The step path (nonlinearity once per shape, then the jobs' coefficients) and the per-job
    path (training, in-step re-scoring) are the same function; jobs of one shape differ only in
    their coefficients, so their scores differ."""
    from inference.features.spec import SHAPE_COLUMNS
    from inference.model.policy_head import ShapeFactoredHead

    torch.manual_seed(0)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, head_rank=3))
    assert isinstance(model.head, ShapeFactoredHead)
    shapes = torch.rand(3, SPEC.job_dim)
    which = torch.tensor([0, 2, 2, 1, 0, 2])
    jobs = torch.rand(len(which), SPEC.job_dim)
    jobs[:, :SHAPE_COLUMNS] = shapes[which, :SHAPE_COLUMNS]  # same resources within a shape, other columns differ
    pairs = torch.rand(3, 20, SPEC.pair_dim)
    part = model.head.precompute(model.encode(torch.rand(1, 20, SPEC.node_dim), _topo(), torch.zeros(1, SPEC.job_dim))[0])
    step = model.head.step_scores(part, jobs, pairs, which)
    each = torch.stack([model.head.score(part, jobs[i], pairs[which[i]]) for i in range(len(which))])
    torch.testing.assert_close(step, each)
    assert not torch.allclose(step[1], step[2])
    with pytest.raises(ValueError):
        ModelConfig(spec=SPEC, head_rank=-1)


# -- the optional heads: cost ψ, transition T, self-correction Δ --------------------------------------------------
SPEC = FeatureSpec(gpu_models=("A10",), text_dim=8, encoder="hashed-ngram-8")


def _topo(n: int = 20) -> TorchTopology:
    return TorchTopology(Topology("knn", None, knn(np.random.default_rng(1).random((n, 3)), 3)))


def test_heads_shapes_and_decide():
    from inference.model.scorer import Action

    model = Scorer(ModelConfig(spec=SPEC, hidden=8, head_hidden=6, cost_dim=2, transition=True, stability=0.5))
    nodes, queue, jobs, pairs = (torch.rand(3, 20, SPEC.node_dim), torch.zeros(3, SPEC.job_dim),
                                 torch.rand(3, SPEC.job_dim), torch.rand(3, 20, SPEC.pair_dim))  # fmt: skip
    h = model.encode(nodes, _topo(), queue)
    part = model.head.precompute(h)
    assert torch.equal(part, model.node_part(nodes, _topo(), queue))
    assert model.cost(part, jobs, pairs).shape == (3, 20, 2)
    assert model.cost(part[0], jobs[0], pairs[0]).shape == (20, 2)  # one step, unbatched, as run_policy holds it
    node = torch.tensor([0, 5, 19])
    after = model.transition(h, Action(jobs, node, pairs[torch.arange(3), node]))
    assert after.shape == h.shape
    delta = model.delta(h, jobs, pairs)
    assert delta.shape == (3, 20) and (delta > 0).all()
    # Δ of the acted node = ‖T(h, a) − h‖ at that node and the shift of any other node, combined
    moved = after - h
    other = (node + 1) % 20
    b = torch.arange(3)
    expect = torch.sqrt((moved[b, node] ** 2).sum(-1) + (moved[b, other] ** 2).sum(-1))
    torch.testing.assert_close(delta[b, node], expect)
    torch.testing.assert_close(model.decide(h, jobs, pairs), model.head.score(part, jobs, pairs) - 0.5 * delta)


@pytest.mark.parametrize("head_rank", [0, 2])
def test_a_steps_delta_is_computed_on_the_fitting_pairs_only(head_rank):
    """run_policy's Δ (subtracted from the scores) has the values of Scorer.delta on h repeated per
    job, over every pair (kept here as the reference); but only the pairs where the job's shape fits
    go through T (Δ over every pair took 215-224 ms a step at 256 jobs × 1,213 nodes: no damped model
    met the promotion gate's latency budget), and Δ is 0 on the others, scored -inf anyway."""
    import dataclasses

    from inference_helpers import job, pod_mix, small_snapshot

    from inference.encoders import EncoderCache, get_encoder
    from inference.model.step import build_inputs, encode_step, run_policy

    spec = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")
    torch.manual_seed(2)
    model = Scorer(ModelConfig(spec=spec, hidden=8, depth=2, head_rank=head_rank, transition=True, stability=0.5))
    snap = small_snapshot()
    snap.reserve(0, job("held", gpus=1), [0])  # (n0's pair rows now differ from its kind's other nodes')
    inputs = build_inputs(snap, pod_mix(14, seed=4), 1.0, spec, EncoderCache(get_encoder(spec.encoder)))
    rows: list[int] = []
    count = lambda m, args, out: rows.append(args[0][..., 0].numel())  # noqa: E731  (the rows T.local saw)
    hook = model.transition_head.local.register_forward_hook(count)
    try:
        out = run_policy(model, inputs)
        every = run_policy(model, dataclasses.replace(inputs, fits=None))
    finally:
        hook.remove()
    fit = inputs.fits[inputs.which]  # [J, N]
    assert 0 < fit.sum() < fit.size
    assert rows == [int(fit.sum()), fit.size]  # the fitting pairs, then (no fits) every pair: no other row
    with torch.inference_mode():
        h, jobs = encode_step(model, inputs), torch.from_numpy(inputs.jobs)
        pairs = torch.from_numpy(inputs.pairs)[torch.from_numpy(inputs.which)]
        ref = model.delta(h.expand(len(jobs), -1, -1), jobs, pairs).numpy()  # the whole computation
        head = model.head.score(model.head.precompute(h), jobs, pairs).numpy()
    np.testing.assert_allclose(out["delta"][fit], ref[fit], rtol=0, atol=1e-6)
    assert (out["delta"][~fit] == 0).all()
    np.testing.assert_allclose(out["scores"][fit], head[fit] - 0.5 * ref[fit], rtol=1e-6, atol=1e-5)
    assert np.isneginf(out["scores"][~fit]).all()
    np.testing.assert_allclose(every["delta"], ref, rtol=0, atol=1e-6)


def test_heads_are_optional_and_old_model_dirs_load(tmp_path):
    import json

    from inference.model import load_model, save_model

    plain = Scorer(ModelConfig(spec=SPEC, hidden=8))
    assert plain.cost_head is None and plain.transition_head is None
    with pytest.raises(ValueError, match="no cost head"):
        plain.cost(torch.rand(4, 32), torch.rand(SPEC.job_dim), torch.rand(4, SPEC.pair_dim))
    save_model(tmp_path / "old", plain, "old-v1")
    meta = json.loads((tmp_path / "old" / "config.json").read_text())
    for key in ("cost_dim", "transition", "stability"):  # written before the heads existed
        meta["model"].pop(key)
    for key in ("cluster", "workload"):
        meta["model"]["spec"].pop(key)
    (tmp_path / "old" / "config.json").write_text(json.dumps(meta))
    loaded = load_model(tmp_path / "old")
    assert loaded.model.cost_head is None and loaded.model.transition_head is None
    assert loaded.config.spec == SPEC
    full = Scorer(ModelConfig(spec=SPEC, hidden=8, cost_dim=1, transition=True))
    save_model(tmp_path / "new", full, "new-v1")
    again = load_model(tmp_path / "new").model
    assert again.cost_head is not None and again.transition_head is not None
    # weights of a model with heads do not load into a config without them: loud, so the policy falls back
    meta = json.loads((tmp_path / "new" / "config.json").read_text())
    meta["model"]["cost_dim"] = 0
    (tmp_path / "new" / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="model.pt: not the weights of the model its config describes"):
        load_model(tmp_path / "new")
