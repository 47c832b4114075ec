"""RL fine-tuning (inference/training/rl.py, rl_rollout.py) on a 24-node cluster with a tiny model."""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from inference_helpers import pod_mix, small_nodes  # noqa: E402

from inference.features.jobs import job_demand  # noqa: E402
from inference.features.nodes import node_state  # noqa: E402
from inference.features.pairs import pair_features  # noqa: E402
from inference.features.spec import FeatureSpec  # noqa: E402
from inference.features.topology import build_topology  # noqa: E402
from inference.model import ModelConfig, Scorer  # noqa: E402
from inference.model.scorer import TorchTopology  # noqa: E402
from inference.training.rl import (  # noqa: E402
    RLOptions,
    _Batch,
    advantages,
    log_probs,
    ppo_update,
    refuse_held_out,
    train_rl,
)
from inference.training.rl_rollout import (  # noqa: E402
    States,
    episode_sequence,
    greedy_rollout,
    node_table,
    returns_to_go,
    sampled_rollout,
    terminal_value,
    window,
)
from scheduling.fill import fill_sequence, run_fill  # noqa: E402
from scheduling.filters.framework import run_filters  # noqa: E402
from scheduling.policies import get_policy  # noqa: E402
from scheduling.snapshot import ClusterSnapshot  # noqa: E402

NODES = small_nodes(24)
PODS = pod_mix(120, seed=3)
CAPACITY = sum(n.num_gpu for n in NODES) * 1000
SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=8, encoder="hashed-ngram-8", cluster=True)
CONFIG = ModelConfig(spec=SPEC, hidden=8, head_hidden=8, depth=2, knn=3)


def model(seed: int = 0) -> Scorer:
    torch.manual_seed(seed)
    return Scorer(CONFIG).eval()


def test_the_episode_is_the_benchmarks_sequence_up_to_the_measured_point():
    seq = episode_sequence(PODS, CAPACITY, 1)
    assert seq == fill_sequence(PODS, CAPACITY, 1)[: len(seq)]
    full = run_fill(NODES, fill_sequence(PODS, CAPACITY, 1), get_policy("best-fit"), 1)
    short = run_fill(NODES, seq, get_policy("best-fit"), 1)
    assert short.arrived[-1] / CAPACITY < 1.005 <= full.arrived[len(seq)] / CAPACITY
    assert terminal_value(short) == pytest.approx(terminal_value(full))


def test_returns_to_go_decompose_the_benchmark_value():
    for policy in ("random", "best-fit"):
        run = run_fill(NODES, episode_sequence(PODS, CAPACITY, 2), get_policy(policy, **({"seed": 2}
                       if policy == "random" else {})), 2)  # fmt: skip
        r = returns_to_go(run)
        arrived = (run.arrived[window(run)] / CAPACITY * 100).mean()
        assert r[0] + arrived == pytest.approx(terminal_value(run))
        assert (np.diff(r) >= -1e-12).all() and r[-1] <= 0  # only drops (negative) accumulate backwards
        if run.dropped:
            assert r[0] < 0
        if not np.isnan(run.allocated_at(100)):
            assert terminal_value(run) == pytest.approx(run.allocated_at(100))


@pytest.mark.parametrize("damped", [False, True], ids=["plain", "stability"])
def test_recomputed_log_probs_match_the_sampling_distribution(damped: bool):
    """Also for a model that decides with score − stability · Δ (found by review: the update scored with
    the head alone, so its ratios were off from the first minibatch and it tuned a policy that never acts)."""
    if damped:
        torch.manual_seed(1)
        m = Scorer(dataclasses.replace(CONFIG, transition=True, stability=0.5)).eval()
        with torch.no_grad():
            for param in m.transition_head.parameters():  # Δ large enough to move the choices
                param.mul_(5)
    else:
        m = model(1)
    seq = episode_sequence(PODS, CAPACITY, 0)
    run, policy = sampled_rollout(m, NODES, seq, 0, temperature=0.7, sample_seed=5, state_rate=1.0, eps=0.0)
    s = policy.states
    assert len(s) > 20 and policy.deviations > 0 and run.placed > 0
    batch = _Batch.of([(s, np.zeros(len(s)))], SPEC.job_dim)
    topo = TorchTopology(build_topology(node_table(NODES, 0), SPEC, CONFIG.knn))
    with torch.no_grad():
        lp = log_probs(m, topo, batch, torch.arange(len(s)), 0.7)
    chosen = lp.gather(1, batch.chosen[:, None])[:, 0].numpy()
    np.testing.assert_allclose(chosen, np.array(s.logp), atol=1e-4)
    assert batch.feasible[torch.arange(len(s)), batch.chosen].all()
    # the distribution sums to one over the feasible nodes only
    np.testing.assert_allclose((lp.exp() * batch.feasible).sum(1).numpy(), 1.0, atol=1e-5)


def test_greedy_rollout_is_the_learned_policy_in_the_fill_benchmark():
    from inference.training.rl_rollout import learned_policy

    m = model(2)
    seq = episode_sequence(PODS, CAPACITY, 3)
    a, b = greedy_rollout(m, NODES, seq, 3), run_fill(NODES, seq, learned_policy(m), 3)
    assert (a.allocated == b.allocated).all()


def toy_batch(better: int, worse: int, n: int = 12) -> tuple[_Batch, TorchTopology, float]:
    """``n`` copies of one state with two feasible nodes: choosing ``better`` earned +1, ``worse`` −1."""
    snap = ClusterSnapshot.from_nodes(NODES)
    job = PODS[0]
    feasible = np.zeros(len(NODES), bool)
    feasible[[better, worse]] = True
    assert run_filters(job, snap, explain=False).feasible_mask[[better, worse]].all()
    s = States()
    for i in range(n):
        s.nodes.append(node_state(snap, SPEC))
        s.pairs.append(pair_features(job, snap, SPEC))
        s.jobs.append(job_demand([job], 0.0, SPEC, __import__("inference.encoders", fromlist=["x"]).get_encoder(
            SPEC.encoder))[0])  # fmt: skip
        s.feasible.append(feasible)
        s.chosen.append(better if i % 2 == 0 else worse)
        s.logp.append(float(np.log(0.5)))
        s.step.append(i)
    adv = np.array([1.0 if c == better else -1.0 for c in s.chosen])
    return _Batch.of([(s, adv)], SPEC.job_dim), TorchTopology(build_topology(snap, SPEC, CONFIG.knn)), 1.0


def test_an_update_moves_the_policy_toward_the_better_action():
    m = model(3)
    ref = model(3)
    better, worse = 1, 0  # a 4xT4 and an 8xA10 node
    batch, topo, scale = toy_batch(better, worse)
    with torch.no_grad():
        before = log_probs(m, topo, batch, torch.arange(1), 1.0)[0, better].exp().item()
    # behaviour log-probs = the current policy's, as a rollout would have recorded them
    with torch.no_grad():
        batch.logp_old = log_probs(m, topo, batch, torch.arange(len(batch)), 1.0).gather(1, batch.chosen[:, None])[:, 0]
    opts = RLOptions(epochs=4, minibatch=4, lr=1e-2, kl=0.0, temperature=1.0, seeds=(0,))
    stats = ppo_update(m, ref, topo, batch, scale, opts, torch.optim.Adam(m.parameters(), lr=opts.lr),
                       np.random.default_rng(0))  # fmt: skip
    with torch.no_grad():
        after = log_probs(m, topo, batch, torch.arange(1), 1.0)[0, better].exp().item()
    assert after > before + 0.05, (before, after)
    assert stats["kl"] > 0  # it moved away from the reference
    # with the advantages reversed, it moves the other way
    m2 = model(3)
    batch.adv = -batch.adv
    ppo_update(m2, ref, topo, batch, scale, opts, torch.optim.Adam(m2.parameters(), lr=opts.lr),
               np.random.default_rng(0))  # fmt: skip
    with torch.no_grad():
        assert log_probs(m2, topo, batch, torch.arange(1), 1.0)[0, better].exp().item() < before - 0.05


@pytest.mark.parametrize("seeds", [(0, 44), (101,), (42,), (104, 3)])
def test_held_out_seeds_are_refused(seeds):
    with pytest.raises(ValueError, match="held out"):
        refuse_held_out(seeds)
    with pytest.raises(ValueError, match="held out"):
        RLOptions(seeds=seeds)
    opts = RLOptions(seeds=(0,))
    opts.seeds = seeds  # even when set after construction, train_rl refuses before any rollout
    with pytest.raises(ValueError, match="held out"):
        train_rl(model(), NODES, PODS, opts)


def test_train_rl_runs_episodes_and_records_them():
    m = model(4)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    opts = RLOptions(episodes=2, seeds=(0, 1), samples=1, temperature=1.0, state_rate=0.5, epochs=1, minibatch=8)
    seen = []
    tuned, history = train_rl(m, NODES, PODS, opts, on_episode=seen.append)
    assert [e.seed for e in history.episodes] == [0, 1] and seen == history.episodes
    assert all(e.states > 0 and 0 < e.greedy <= 101 and len(e.samples) == 1 for e in history.episodes)
    assert any(not torch.equal(before[k], v) for k, v in tuned.state_dict().items())  # it learned something
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())  # on a copy
    j = history.to_json()
    assert j["episodes"][0]["seed"] == 0 and j["options"]["seeds"] == [0, 1] and j["stopped"] == "episodes"


def test_the_time_budget_stops_before_a_new_episode():
    opts = RLOptions(episodes=5, seeds=(0,), samples=1, minutes=0.0, state_rate=0.5)
    _, history = train_rl(model(5), NODES, PODS, opts)
    assert history.episodes == [] and history.stopped == "time budget"


def test_the_baselines():
    seq = episode_sequence(PODS, CAPACITY, 2)
    runs = []
    for k in range(2):
        run, policy = sampled_rollout(model(6), NODES, seq, 2, temperature=3.0, sample_seed=k, state_rate=1.0, eps=0.0)
        runs.append((policy.states, returns_to_go(run)))
    greedy = returns_to_go(greedy_rollout(model(6), NODES, seq, 2))
    assert not np.array_equal(runs[0][1], runs[1][1])  # the two samples dropped different pods
    (s0, a0), (s1, a1) = advantages(runs, greedy, "loo")
    steps0, steps1 = np.array(s0.step), np.array(s1.step)
    np.testing.assert_allclose(a0, (runs[0][1] - runs[1][1])[steps0])
    np.testing.assert_allclose(a1, -(runs[0][1] - runs[1][1])[steps1])  # zero-mean per pod index
    (_, g0), _ = advantages(runs, greedy, "greedy")
    np.testing.assert_allclose(g0, (runs[0][1] - greedy)[steps0])
    with pytest.raises(ValueError, match="loo"):
        RLOptions(samples=1, baseline="loo")
