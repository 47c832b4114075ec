"""Decision-time lookahead through T (inference/lookahead.py): its settings, its rollouts against a
hand computation, and a step where only looking ahead keeps room for the next job."""

import numpy as np
import pytest
import torch
from inference_helpers import job, pod_mix, small_snapshot

import inference  # noqa: F401  (registers "learned" and "learned-lookahead")
from inference.features.pair_cache import PairCache
from inference.features.pairs import pair_features
from inference.features.spec import FeatureSpec
from inference.lookahead import ENV, Lookahead
from inference.model import ModelConfig, Scorer, save_model
from inference.model.scorer import Action
from inference.model.step import build_inputs, encode_step
from inference.policy import LearnedPolicy
from scheduling.assign import schedule_step
from scheduling.gpu_select import select_gpus
from scheduling.node import NodeView
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


def model_dir(tmp_path, seed: int = 0, heads: bool = True):
    torch.manual_seed(seed)
    config = ModelConfig(spec=SPEC, hidden=8, depth=2, head_rank=2, cost_dim=1 if heads else 0, transition=heads)
    save_model(tmp_path / "m", Scorer(config), "look-v1")
    return tmp_path / "m"


def test_settings_from_the_environment(monkeypatch):
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)
    assert Lookahead.from_env() == Lookahead(depth=2, width=4, weight=100_000.0, per_step=64)
    monkeypatch.setenv(ENV["depth"], "3")
    monkeypatch.setenv(ENV["weight"], "250")
    assert Lookahead.from_env() == Lookahead(depth=3, width=4, weight=250.0)
    monkeypatch.setenv(ENV["width"], "four")
    with pytest.raises(ValueError, match="SEMSCHED_LOOKAHEAD_WIDTH='four' is not an integer"):
        Lookahead.from_env()
    monkeypatch.setenv(ENV["width"], "1")
    with pytest.raises(ValueError, match="width must be within 2..16"):
        Lookahead.from_env()
    with pytest.raises(ValueError, match="weight"):
        Lookahead(weight=float("nan"))
    monkeypatch.setenv(ENV["width"], "3")
    monkeypatch.setenv(ENV["per_step"], "-2")
    with pytest.raises(ValueError, match="SEMSCHED_LOOKAHEAD_PER_STEP.*per_step must be >= 0, not -2"):
        Lookahead.from_env()


def test_learned_lookahead_is_registered_with_the_environment_settings(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV["depth"], "5")
    p = get_policy("learned-lookahead", model_dir=model_dir(tmp_path))
    assert isinstance(p, LearnedPolicy) and p.name == "learned-lookahead" and not p.fell_back
    assert p.lookahead == Lookahead(depth=5)
    assert get_policy("learned", model_dir=tmp_path / "m").lookahead is None


def first_placed_by_hand(model, h, node_part, snap, inputs, first, second, candidate):  # noqa: ANN001, ANN201
    """ψ of ``first`` on ``candidate``, then what the rollout sees for ``second`` (its row, T(h, a), its pair
    features after the placement, the nodes with 2 GPUs free): the path cost's first half, by hand."""
    row_a, row_b = torch.from_numpy(inputs.jobs[0]), torch.from_numpy(inputs.jobs[1])
    pa = torch.from_numpy(pair_features(first, snap, SPEC)[candidate])
    want = float(model.cost(node_part[candidate][None], row_a, pa[None])[0, 0])
    after = snap.copy()
    after.reserve(candidate, first, select_gpus(after, candidate, first))
    h1 = model.transition(h[None], Action(row_a[None], torch.tensor([candidate]), pa[None]))[0]
    pb = torch.from_numpy(pair_features(second, after, SPEC))
    return want, row_b, h1, pb, np.flatnonzero(after.num_gpu >= 2)


def test_path_costs_follow_the_model_through_t(tmp_path):
    """One candidate's cost, computed by hand: ψ of the job there, then the next job placed on the
    head's best node under T(h, a) with the pair features of the cluster after the placement."""
    p = LearnedPolicy(model_dir(tmp_path, seed=3))
    model = p.loaded.model
    snap = small_snapshot()
    first, second = job("a", gpus=1, per=500), job("b", gpus=2)
    inputs = build_inputs(snap, [first, second], 1.0, SPEC, p.encoder())
    h = encode_step(model, inputs)
    with torch.inference_mode():
        node_part = model.head.precompute(h)
    look = Lookahead(depth=1, width=2)
    candidate = 4  # an 8xA10 node
    got = look.path_costs(model, h.numpy(), node_part.numpy(), first, inputs.jobs[0], np.array([candidate]), snap,
                          [(second, inputs.jobs[1])], SPEC, PairCache())  # fmt: skip
    with torch.inference_mode():
        want, row_b, h1, pb, fits = first_placed_by_hand(model, h, node_part, snap, inputs, first, second, candidate)
        scores = model.head.score(model.head.precompute(h1), row_b, pb)[fits]
        best = int(fits[int(torch.argmax(scores))])
        want += float(model.cost(model.head.precompute(h1)[best][None], row_b, pb[best][None])[0, 0])
    assert got.shape == (1,) and got[0] == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert look.stats.rollouts == 1 and look.stats.stranded == 0


@pytest.mark.parametrize("seed", [1, 3, 4])  # (seeds where Δ moves the next job's pick)
def test_path_costs_roll_a_damped_model_as_it_decides(seed):
    """Found by review: for a model that damps churn (stability > 0), the rollouts placed the next job
    on the head's best node, while the policy decides with score − stability · Δ. Under T(h, a) the
    rollout now picks as the policy would, and the cost is ψ at that pick (by hand here)."""
    from inference.encoders import EncoderCache, get_encoder

    torch.manual_seed(seed)
    model = Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, head_rank=2, cost_dim=1, transition=True,
                               stability=5.0)).eval()  # fmt: skip
    snap = small_snapshot()
    first, second = job("a", gpus=1, per=500), job("b", gpus=2)
    inputs = build_inputs(snap, [first, second], 1.0, SPEC, EncoderCache(get_encoder(SPEC.encoder)))
    candidate = 4  # an 8xA10 node
    with torch.inference_mode():
        h = encode_step(model, inputs)
        node_part = model.head.precompute(h)
        want, row_b, h1, pb, fits = first_placed_by_hand(model, h, node_part, snap, inputs, first, second, candidate)
        part1 = model.head.precompute(h1)
        plain = model.head.score(part1, row_b, pb)[fits]
        damped = model.decide(h1, row_b, pb)[fits]  # what the policy decides with
        best = int(fits[int(torch.argmax(damped))])
        want += float(model.cost(part1[best][None], row_b, pb[best][None])[0, 0])
        head_best = int(fits[int(torch.argmax(plain))])  # where the rollout placed "b" before
        undamped = float(model.cost(part1[head_best][None], row_b, pb[head_best][None])[0, 0])
    assert head_best != best  # (else this seed tells nothing)
    got = Lookahead(depth=1, width=2).path_costs(model, h.numpy(), node_part.numpy(), first, inputs.jobs[0],
                                                 np.array([candidate]), snap, [(second, inputs.jobs[1])], SPEC,
                                                 PairCache())  # fmt: skip
    assert got[0] == pytest.approx(want, rel=1e-5, abs=1e-6) and got[0] != pytest.approx(undamped, rel=1e-5)


def one_free_node_each() -> ClusterSnapshot:
    """Two 8-GPU nodes: one with a single GPU free, one with all eight."""
    snap = ClusterSnapshot.from_nodes([NodeView(node_id=f"n{i}", cpu_milli=64_000, memory_mib=262_144, num_gpu=8,
                                                gpu_model="A10") for i in range(2)])  # fmt: skip
    snap.reserve(0, job("held", cpu=1000, mem=1024, gpus=7), list(range(7)))
    return snap


@pytest.mark.parametrize("seed", range(4))
def test_looking_ahead_keeps_room_for_the_next_job(tmp_path, seed):
    """A one-GPU job, then an eight-GPU one: the first must take the nearly full node or the second
    has nowhere to go. Whatever the (untrained) model prefers, the rollouts see the second job
    stranded on one path and move the first job; the plain policy is left to its preference."""
    d = model_dir(tmp_path, seed=seed)
    small, big = job("a", cpu=2000, mem=4096, gpus=1), job("b", cpu=2000, mem=4096, gpus=8)
    look = LearnedPolicy(d, lookahead=Lookahead(depth=1, width=2, weight=1e4))
    result = schedule_step(one_free_node_each(), [small, big], look, now=0.0, top_k=0)
    assert {pl.job_id: pl.node_id for pl in result.placements} == {"a": "n0", "b": "n1"}
    assert look.decision_notes["a"].startswith("lookahead over the next 1 job(s) through T: predicted path cost ")
    assert "GPU on n0, the least of 2 candidates" in look.decision_notes["a"] and "b" not in look.decision_notes
    assert look.lookahead.stats.decisions == 1 and look.lookahead.stats.stranded == 1  # "b" has one node: no rollout
    plain = LearnedPolicy(d)
    placed = {pl.job_id for pl in schedule_step(one_free_node_each(), [small, big], plain, now=0.0, top_k=0).placements}
    assert "a" in placed  # (and "b" only where the model happened to prefer n0 for "a")


def test_weight_zero_or_no_next_job_changes_nothing(tmp_path):
    d = model_dir(tmp_path, seed=1)
    jobs = [j for j in pod_mix(24, seed=2) if j.num_gpu]
    plain = schedule_step(small_snapshot(), jobs, LearnedPolicy(d), now=0.0, top_k=0)
    zero = LearnedPolicy(d, lookahead=Lookahead(weight=0.0))
    same = schedule_step(small_snapshot(), jobs, zero, now=0.0, top_k=0)
    assert [(x.job_id, x.node_id, x.gpu_indices) for x in same.placements] == \
        [(x.job_id, x.node_id, x.gpu_indices) for x in plain.placements]  # fmt: skip
    assert zero.lookahead.stats.decisions > 0 and zero.lookahead.stats.changed == 0
    alone = LearnedPolicy(d, lookahead=Lookahead(weight=1e4))
    schedule_step(small_snapshot(), jobs[:1], alone, now=0.0, top_k=0)
    assert alone.lookahead.stats.decisions == 0  # nothing after it in the step


def test_a_candidate_that_could_not_be_rolled_does_not_rank_cheapest_and_the_note_says_what_won(monkeypatch):
    """Found by review: a NaN path cost (no GPUs fit there; a diverged ψ) lost nothing (``nan_to_num``),
    so the head's best won whatever the others cost, and the note called its NaN "the least of N";
    and a pick whose score gap outweighed a cheaper path was called the least too."""
    snap = small_snapshot(4)
    costs = {"now": np.array([np.nan, 0.2, 0.1])}
    monkeypatch.setattr(Lookahead, "path_costs", lambda self, *args: costs["now"].copy())
    scores = np.array([5.0, 4.0, 3.0, -np.inf])
    look = Lookahead(depth=1, width=3, weight=1.0)

    def decide() -> tuple[np.ndarray, str]:
        out = look.adjust(None, None, None, job("a"), None, scores, snap, [(job("b"), None)], SPEC, PairCache())
        return out, look.explain(snap, out, 1)

    out, note = decide()
    assert out.tolist() == pytest.approx([-np.inf, 3.9, 3.0, -np.inf])  # n1: 0.1 GPU dearer, 1.0 ahead
    assert note == ("lookahead over the next 1 job(s) through T: predicted path cost 0.200 GPU on n1, not the least "
                    "of 3 candidates (0.100 GPU on n2): its score was ahead by more than the weight times the "
                    "difference (the head's best, n0: not rolled); 1 candidate(s) could not be rolled")  # fmt: skip
    look.weight = 100.0
    out, note = decide()
    assert int(np.argmax(out)) == 2 and note.startswith(
        "lookahead over the next 1 job(s) through T: predicted path cost 0.100 GPU on n2, the least of 3 candidates")
    costs["now"] = np.array([0.3, np.inf, 0.4])  # (a ψ that diverged: unknown, as NaN)
    out, note = decide()
    assert out.tolist() == pytest.approx([5.0, -np.inf, 3.0 - 10.0, -np.inf])
    assert note.endswith("the least of 3 candidates; 1 candidate(s) could not be rolled")
    costs["now"] = np.full(3, np.nan)  # nothing rolled: the plain scores decide
    out, note = decide()
    assert out.tolist() == scores.tolist()
    assert note.endswith("none of the 3 candidates could be rolled; the plain scores decide")
    look.weight, costs["now"] = 0.0, np.array([np.nan, 0.2, 0.1])  # a weight of 0 changes nothing
    out, note = decide()
    assert out.tolist() == scores.tolist() and "n0 kept on its score, its path not rolled" in note


def test_a_model_without_cost_or_transition_heads_is_not_rolled(tmp_path, caplog):
    """... and says so: once when the policy is built, and on each decision's record (which reads
    learned-lookahead, not fallen back: without the note nothing tells that the plain scores decided)."""
    d = model_dir(tmp_path, heads=False)
    with caplog.at_level("WARNING", logger="inference.policy"):
        p = LearnedPolicy(d, lookahead=Lookahead(weight=1e4))
    assert [r.getMessage() for r in caplog.records] == [
        "learned-lookahead: model look-v1 has no cost head (ψ) and transition head (T); every decision is the "
        "plain learned policy's"]  # fmt: skip
    result = schedule_step(one_free_node_each(), [job("a", gpus=1), job("b", gpus=8)], p, now=0.0, top_k=0)
    assert result.placements and p.lookahead.stats.rollouts == 0 and not p.last_step.fallback
    assert p.decision_notes["a"] == ("lookahead off: the model has no cost head (ψ) and transition head (T); "
                                     "the plain scores decide")  # fmt: skip
    caplog.clear()
    with caplog.at_level("WARNING", logger="inference.policy"):
        LearnedPolicy(model_dir(tmp_path / "heads"), lookahead=Lookahead())
        LearnedPolicy(d)  # (no lookahead: nothing to warn of)
    assert not caplog.records


def test_a_step_rolls_at_most_per_step_decisions(tmp_path):
    d = model_dir(tmp_path, seed=2)
    jobs = [j for j in pod_mix(30, seed=4) if j.num_gpu][:6]
    p = LearnedPolicy(d, lookahead=Lookahead(per_step=2))
    for _ in range(2):  # the count starts again with each step
        schedule_step(small_snapshot(), jobs, p, now=0.0, top_k=0)
    stats = p.lookahead.stats
    assert stats.decisions == 4 and stats.capped >= 2 and 8 <= stats.rollouts <= 4 * p.lookahead.width
    # a capped decision's record says the plain scores decided it (else it reads as looked ahead)
    capped = [n for n in p.decision_notes.values() if n.startswith("lookahead not run")]
    assert capped and capped[0] == ("lookahead not run: the step rolled 2 decisions already "
                                    "(SEMSCHED_LOOKAHEAD_PER_STEP); the plain scores decide")  # fmt: skip
    assert len(p.decision_notes) - len(capped) == 2
    with pytest.raises(ValueError, match="per_step"):
        Lookahead(per_step=-1)


def test_the_rolled_jobs_are_the_ones_still_to_come(tmp_path, monkeypatch):
    """A gang is placed whole at its first member, so a job between its members must not roll the
    later member (already placed); after the step, a job scored again (as the simulator's
    preemption does) rolls nothing."""
    d = model_dir(tmp_path, seed=5)
    rolled: list[tuple[str, list[str]]] = []
    real = Lookahead.path_costs

    def spy(self, model, h, node_part, job, job_row, candidates, snapshot, upcoming, *rest):  # type: ignore[no-untyped-def]
        rolled.append((job.job_id, [j.job_id for j, _ in upcoming]))
        return real(self, model, h, node_part, job, job_row, candidates, snapshot, upcoming, *rest)

    monkeypatch.setattr(Lookahead, "path_costs", spy)
    gang = {"gang_id": "g", "gang_size": 2}
    jobs = [job("g1", gpus=1, submit_time=0.0, **gang), job("x", gpus=1, submit_time=1.0),
            job("g2", gpus=1, submit_time=2.0, **gang), job("y", gpus=2, submit_time=3.0),
            job("z", gpus=1, submit_time=4.0)]  # fmt: skip
    p = LearnedPolicy(d, lookahead=Lookahead(depth=2))
    snap = small_snapshot()
    result = schedule_step(snap, jobs, p, now=5.0, top_k=0)
    assert {pl.job_id for pl in result.placements} == {"g1", "g2", "x", "y", "z"}
    assert dict(rolled)["x"] == ["y", "z"]  # not g2: placed with g1
    assert dict(rolled)["g1"] == ["x", "y"] and dict(rolled)["y"] == ["z"] and "z" not in dict(rolled)
    before = len(rolled)
    p.score(jobs[1], snap, np.ones(snap.num_nodes, bool))  # after the step: every job was scored
    assert len(rolled) == before


@pytest.mark.parametrize("seed", range(2))
def test_a_job_that_fits_nowhere_now_is_not_rolled(tmp_path, monkeypatch, seed):
    """Between "a" and the eight-GPU "big" comes "stuck", which fits on no node now (two GPUs: n0 has
    one free; n1 has eight but too little CPU left) though it would on the empty cluster. The rollouts
    of "a" pass over it to "big", so "a" still keeps n1 free for "big"; rolling "stuck" (stranded on
    every path alike) would leave "a" to the model's preference."""
    d = model_dir(tmp_path, seed=seed)
    rolled: dict[str, list[str]] = {}
    real = Lookahead.path_costs

    def spy(self, model, h, node_part, job, job_row, candidates, snapshot, upcoming, *rest):  # type: ignore[no-untyped-def]
        rolled[job.job_id] = [j.job_id for j, _ in upcoming]
        return real(self, model, h, node_part, job, job_row, candidates, snapshot, upcoming, *rest)

    monkeypatch.setattr(Lookahead, "path_costs", spy)
    snap = one_free_node_each()
    snap.reserve(1, job("cpu-hog", cpu=60_000, mem=1024, gpus=0), [])  # n1: 4,000 CPU milli left
    jobs = [job("a", cpu=2000, mem=4096, gpus=1, submit_time=0.0),
            job("stuck", cpu=10_000, mem=4096, gpus=2, submit_time=1.0),
            job("big", cpu=2000, mem=4096, gpus=8, submit_time=2.0)]  # fmt: skip
    look = LearnedPolicy(d, lookahead=Lookahead(depth=1, width=2, weight=1e4))
    result = schedule_step(snap, jobs, look, now=3.0, top_k=0)
    assert rolled["a"] == ["big"]
    assert {pl.job_id: pl.node_id for pl in result.placements} == {"a": "n0", "big": "n1"}
    assert [u.job_id for u in result.unschedulable] == ["stuck"]


def test_failed_rollouts_leave_the_decision_to_the_plain_scores(tmp_path, monkeypatch):
    d = model_dir(tmp_path, seed=1)
    jobs = [j for j in pod_mix(24, seed=2) if j.num_gpu]
    plain = schedule_step(small_snapshot(), jobs, LearnedPolicy(d), now=0.0, top_k=0)

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("no rollout today")

    monkeypatch.setattr(Lookahead, "path_costs", broken)
    p = LearnedPolicy(d, lookahead=Lookahead())
    got = schedule_step(small_snapshot(), jobs, p, now=0.0, top_k=0)
    assert [(x.job_id, x.node_id) for x in got.placements] == [(x.job_id, x.node_id) for x in plain.placements]
    assert p.lookahead.stats.errors > 0 and p.lookahead.stats.decisions == 0 and not p.last_step.fallback
    # each such decision's record says so (it reads learned-lookahead, not fallen back)
    assert len(p.decision_notes) == p.lookahead.stats.errors
    assert set(p.decision_notes.values()) == {"lookahead failed (RuntimeError: no rollout today); "
                                              "the plain scores decide"}  # fmt: skip


def test_a_warm_up_leaves_the_lookahead_as_it_was(tmp_path):
    import asyncio

    d = model_dir(tmp_path, seed=6)
    warm, cold = (LearnedPolicy(d, lookahead=Lookahead()) for _ in range(2))
    assert asyncio.run(warm.warm_up()) > 0
    assert not warm.caches.lookahead_pairs
    jobs = [j for j in pod_mix(20, seed=7) if j.num_gpu]
    a = schedule_step(small_snapshot(), jobs, warm, now=0.0, top_k=0)
    b = schedule_step(small_snapshot(), jobs, cold, now=0.0, top_k=0)
    assert [(p.job_id, p.node_id, p.gpu_indices) for p in a.placements] == \
        [(p.job_id, p.node_id, p.gpu_indices) for p in b.placements]  # fmt: skip


def test_the_steps_h_is_the_answers_or_the_encoders_on_its_inputs(tmp_path):
    """h₀ for the rollouts: a model that damps churn sends h with its answer; otherwise it is the
    fusion encoder on the step's own inputs (what a Triton step would have computed on the server)."""
    torch.manual_seed(7)
    config = ModelConfig(spec=SPEC, hidden=8, depth=2, head_rank=2, cost_dim=1, transition=True, stability=0.5)
    save_model(tmp_path / "damped", Scorer(config), "damped-v1")
    snap, jobs = small_snapshot(), [j for j in pod_mix(12, seed=3) if j.num_gpu][:4]
    for d in (tmp_path / "damped", model_dir(tmp_path, seed=7)):
        p = LearnedPolicy(d)
        p.score(p.order(jobs, 1.0)[0], snap, np.ones(snap.num_nodes, bool))
        step, model = p._step, p.loaded.model
        want = encode_step(model, build_inputs(snap, p._windows.ordered, 1.0, SPEC, p.encoder())).numpy()
        np.testing.assert_allclose(step.h(model), want, rtol=1e-5, atol=1e-6)
        assert ("h" in step.outputs) == (d.name == "damped")


def test_a_step_from_a_version_not_held_here_is_not_rolled(tmp_path):
    """... and its record says so. (This test asserted no note once: but the record then read
    learned-lookahead, not fallen back, with nothing telling that the plain scores decided — when no
    node had moved, in-step re-scoring had nothing to skip and wrote no note either.)"""
    d = model_dir(tmp_path, seed=8)
    p = LearnedPolicy(d, lookahead=Lookahead())
    snap, jobs = small_snapshot(), [j for j in pod_mix(20, seed=9) if j.num_gpu][:5]
    ordered = p.order(jobs, 0.0)

    def scored_where_it_fits(i: int) -> np.ndarray:  # the nodes the step's call scored (nothing to re-score)
        return p.score(ordered[i], snap, np.isfinite(p._step.scores[p._step.index[ordered[i].job_id]]))

    p.score(ordered[0], snap, np.ones(snap.num_nodes, bool))  # (the step's call)
    scored_where_it_fits(1)
    assert p.lookahead.stats.decisions == 2 and ordered[1].job_id in p.decision_notes
    p._step.version = "a-newer-version"  # as when a server answered with a version this worker does not hold yet
    scored_where_it_fits(2)
    assert p.lookahead.stats.decisions == 2
    assert p.decision_notes[ordered[2].job_id] == ("lookahead skipped: local model look-v1 != a-newer-version; "
                                                   "the plain scores decide")  # fmt: skip
    assert not p.last_step.fallback
