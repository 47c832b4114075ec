"""Model promotion against a real chdb archive, with tiny models trained in a few seconds.

"good" imitates best-fit; "bad" is trained AWAY from best-fit's choices (the target set is
every other feasible node), so it spreads pods and strands GPUs: on the held-out fill
replay it allocates far less. Both are real trained scorers, evaluated by the real replay (fill and model-step latency), and
recorded in the archive's ``model_versions`` table through ``ops.model_registry.ArchiveRegistry``.
Latency is only asserted to have been measured (positive); the budget rule is exercised with a
budget no real step meets (0 ms) and with none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from inference_helpers import pod_mix, small_nodes
from training_helpers import SPEC

from inference.encoders import EncoderCache, HashedNgramEncoder
from inference.model import ModelConfig, point_latest, save_model
from inference.training import Demonstrations, RecordingPolicy, TrainOptions, train_imitation
from inference.training.heldout import PRIMARY_METRIC, HeldOutReplay, evaluate_held_out
from inference.training.promotion import promote
from ops.model_registry import ArchiveRegistry
from scheduling.fill import run_fill
from scheduling.policies import get_policy

CONFIG = ModelConfig(spec=SPEC, hidden=16, depth=2, knn=3, head_hidden=16)
REPLAY = HeldOutReplay(seeds=(100, 101), inputs="test: 24 small nodes, 120 pods")
NODES, PODS = small_nodes(24), pod_mix(120, seed=3)


def _demos(anti: bool) -> Demonstrations:
    out = Demonstrations()
    for s in (0, 1):
        rec = RecordingPolicy(get_policy("best-fit"), SPEC, EncoderCache(HashedNgramEncoder(8)), rate=1.0, seed=s)
        run_fill(small_nodes(16), pod_mix(70, seed=s), rec, s)
        out.extend(rec.demos)
    if anti:
        out.target = [f & ~t for f, t in zip(out.feasible, out.target, strict=True)]
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Model directories outside any models root: good, bad, and each one's weights under another version."""
    root = tmp_path_factory.mktemp("trained")
    out = {}
    for name, anti in (("good", False), ("bad", True)):
        model, _ = train_imitation(_demos(anti), CONFIG, TrainOptions(epochs=6, batch=8, lr=1e-2, seed=0))
        out[name] = save_model(root / name, model, name, {"expert": "best-fit", "anti": anti})
        twin = f"{name}-twin"  # the same weights under another version
        out[twin] = save_model(root / twin, model, twin, {"expert": "best-fit", "anti": anti})
    return out


def _run(candidate: Path, root: Path, archive, **kw):  # noqa: ANN001, ANN202
    # no latency budget unless a test is about it: wall-clock time on a loaded machine must not
    # decide a test about allocation (a tiny model's p99 measured 150 ms once, beside a training run)
    kw.setdefault("latency_budget_ms", None)
    return promote(candidate, root, ArchiveRegistry(archive), NODES, PODS, REPLAY, **kw)


def get_version(archive, version: str):  # noqa: ANN001, ANN201
    return ArchiveRegistry(archive).get(version)


def list_versions(archive):  # noqa: ANN001, ANN201
    return ArchiveRegistry(archive).list()


def _serve(trained: dict[str, Path], name: str, root: Path) -> None:
    """``name`` serves in ``root`` without ever having been recorded (promoted by hand)."""
    shutil.copytree(trained[name], root / name)
    point_latest(root, name)


def test_the_held_out_replay_separates_the_models(trained):
    good = evaluate_held_out(trained["good"], NODES, PODS, REPLAY)
    bad = evaluate_held_out(trained["bad"], NODES, PODS, REPLAY)
    assert good["loaded"] and good["primary_metric"] == PRIMARY_METRIC and len(good["per_seed"]) == 2
    assert good["score"] > bad["score"] + 5  # percentage points of GPU allocated
    with pytest.raises(ValueError, match="42"):
        HeldOutReplay(seeds=(42, 100))
    with pytest.raises(ValueError, match="training"):
        HeldOutReplay(seeds=(3,))


def test_first_version_is_promoted_and_recorded(trained, archive, tmp_path):
    root = tmp_path / "models"
    r = _run(trained["good"], root, archive)
    assert r.promoted and r.reason.startswith("first version; p99 model step") and r.serving is None
    assert r.serving_version is None
    assert (root / "latest").resolve() == (root / "good").resolve() and r.latest == "good"
    row = get_version(archive, "good")
    assert row is not None and row.status == "promoted" and row.source == "simulator" and row.expert == "best-fit"
    assert row.evaluation["candidate"]["score"] == pytest.approx(r.candidate["score"])
    assert row.candidate_score == pytest.approx(r.candidate["score"]) and row.serving_score is None
    assert row.config == json.loads((root / "good" / "config.json").read_text())["model"]
    assert row.decided_at is not None
    # the status update replaced the 'candidate' row: two revisions stored, one read back
    _, [(revisions,)] = archive.query_rows("SELECT count() FROM model_versions WHERE version = 'good'")
    assert revisions == 2 and [v.version for v in list_versions(archive)] == ["good"]


def test_a_worse_candidate_is_rejected_and_latest_stays(trained, archive, tmp_path):
    root = tmp_path / "models"
    _serve(trained, "good", root)
    r = _run(trained["bad"], root, archive)
    assert r.status == "rejected" and "not better than serving good" in r.reason
    assert (root / "latest").resolve() == (root / "good").resolve()
    assert not (root / "bad").exists()  # a refused candidate is not copied into the model root
    bad, good = get_version(archive, "bad"), get_version(archive, "good")
    assert bad is not None and bad.status == "rejected" and bad.parent_version == "good"
    assert bad.candidate_score < bad.serving_score  # type: ignore[operator]
    assert bad.evaluation["serving"]["score"] == pytest.approx(r.serving["score"])  # type: ignore[index]
    # the serving version was never recorded: it is now, with its own evaluation
    assert good is not None and good.status == "promoted" and "before it was recorded" in good.reason
    assert good.evaluation["candidate"]["score"] == pytest.approx(bad.serving_score)


def test_a_better_candidate_is_promoted(trained, archive, tmp_path):
    root = tmp_path / "models"
    _serve(trained, "bad", root)
    r = _run(trained["good"], root, archive)
    assert r.promoted and r.serving_version == "bad" and r.candidate["score"] > r.serving["score"]  # type: ignore[index]
    assert (root / "latest").resolve() == (root / "good").resolve()
    rows = {v.version: v for v in list_versions(archive)}
    assert rows["good"].status == "promoted" and rows["good"].parent_version == "bad"
    assert rows["good"].evaluation["serving_version"] == "bad"
    assert rows["bad"].status == "promoted"  # it served (recorded on the way)


def test_an_equal_candidate_is_not_promoted_and_the_serving_evaluation_is_reused(trained, archive, tmp_path):
    root = tmp_path / "models"
    first = _run(trained["good"], root, archive)
    r = _run(trained["good-twin"], root, archive)  # the same weights under another version
    assert r.status == "rejected" and r.candidate["score"] == pytest.approx(first.candidate["score"])
    assert r.serving is not None and r.serving.get("reused_from_registry") is True
    assert (root / "latest").resolve() == (root / "good").resolve()
    fresh = _run(trained["bad"], root, archive, reuse_serving_evaluation=False)
    assert "reused_from_registry" not in (fresh.serving or {}) and fresh.status == "rejected"


def test_a_serving_evaluation_on_other_inputs_or_an_older_replay_is_not_reused(trained, archive, tmp_path, monkeypatch):  # noqa: ANN001
    """(Found by review: reuse asked only for the same replay settings, so an evaluation recorded on another
    pod list under the loader's default path, or before the metric was redefined, was compared seed by
    seed with the candidate's.)"""
    import inference.training.heldout as heldout

    root = tmp_path / "models"
    _run(trained["good"], root, archive)
    fewer = promote(trained["good-twin"], root, ArchiveRegistry(archive), NODES, PODS[:-1], REPLAY, latency_budget_ms=None)
    assert fewer.serving is not None and "reused_from_registry" not in fewer.serving
    again = _run(trained["good-twin"], root, archive)  # the serving row still holds its evaluation on PODS
    assert again.serving is not None and again.serving.get("reused_from_registry") is True
    monkeypatch.setattr(heldout, "REPLAY_VERSION", heldout.REPLAY_VERSION + 1)  # what a run measures changed
    newer = _run(trained["good-twin"], root, archive)
    assert newer.serving is not None and "reused_from_registry" not in newer.serving


def test_a_candidate_that_does_not_load_is_rejected(trained, archive, tmp_path):
    root = tmp_path / "models"
    _serve(trained, "good", root)
    broken = tmp_path / "broken"
    shutil.copytree(trained["bad"], broken)
    meta = json.loads((broken / "config.json").read_text())
    meta["version"] = "broken"
    (broken / "config.json").write_text(json.dumps(meta))
    (broken / "model.pt").write_bytes(b"not a state dict")
    r = _run(broken, root, archive)
    assert r.status == "rejected" and "does not load" in r.reason
    assert r.serving is None  # its replay not run for nothing (found by review: it ran all the same)
    assert (root / "latest").resolve() == (root / "good").resolve() and not (root / "broken").exists()
    assert get_version(archive, "broken").status == "rejected"  # type: ignore[union-attr]


def test_the_simulator_slice_is_recorded_beside_the_fill_score(trained, archive, tmp_path):
    from scheduling.simulator import SimConfig, SimJob

    jobs = [SimJob(p, duration_s=float(5 + i % 7)) for i, p in enumerate(pod_mix(60, seed=9))]  # 1 arrival / s
    sim = (small_nodes(8), jobs, SimConfig(step_s=1.0, load_factor=4.0))
    replay = HeldOutReplay(seeds=(100,), inputs="test", extra={"sim": "60 pods on 8 nodes, x4"})
    r = promote(trained["good"], tmp_path / "models", ArchiveRegistry(archive), NODES, PODS, replay, sim=sim)
    got = r.candidate["simulator"]
    assert got["jobs"] == 60 and got["finished"] == 60 and got["jct_mean"] >= 5 and got["queue_mean"] >= 0
    assert get_version(archive, "good").evaluation["candidate"]["simulator"] == got  # type: ignore[union-attr]


def test_the_evaluation_times_the_model_step(trained):
    ev = evaluate_held_out(trained["good"], NODES, PODS, REPLAY)
    lat = ev["latency"]
    assert lat["pending"] == 256 and lat["nodes"] == len(NODES) and lat["repeat"] == REPLAY.latency_repeat
    assert 0 < lat["p50_ms"] <= lat["p99_ms"] and lat["inputs_p50_ms"] > 0 and lat["model_p50_ms"] > 0
    assert 0 < lat["gpu_used_pct"] <= 100 * REPLAY.latency_load + 1e-9
    assert evaluate_held_out(get_policy("best-fit"), NODES, PODS, REPLAY)["latency"] is None  # no model call


def test_the_latency_is_recorded_with_the_evaluation(trained, archive, tmp_path):
    r = _run(trained["good"], tmp_path / "models", archive, latency_budget_ms=100.0)
    row = get_version(archive, "good")
    assert row is not None and row.step_latency == r.candidate["latency"] and row.step_latency["p99_ms"] > 0
    assert row.evaluation["latency_budget_ms"] == 100.0


def test_a_candidate_over_the_latency_budget_is_refused_by_that_rule(trained, archive, tmp_path):
    root = tmp_path / "models"
    r = _run(trained["good"], root, archive, latency_budget_ms=0.0)  # no real step takes 0 ms
    assert r.status == "rejected" and r.reason.startswith("latency: p99 model step") and "budget 0 ms" in r.reason
    assert not (root / "latest").exists() and r.latest is None
    assert get_version(archive, "good").status == "rejected"  # type: ignore[union-attr]


def test_a_better_candidate_over_budget_stays_out(trained, archive, tmp_path):
    root = tmp_path / "models"
    _serve(trained, "bad", root)
    r = _run(trained["good"], root, archive, latency_budget_ms=0.0)
    assert r.status == "rejected" and r.reason.startswith("latency:") and "allocation" not in r.reason
    assert r.candidate["score"] > r.serving["score"]  # type: ignore[index]  (only the latency rule refused)
    assert (root / "latest").resolve() == (root / "bad").resolve()
    worse = _run(trained["bad-twin"], root, archive, latency_budget_ms=0.0, reuse_serving_evaluation=True)
    # the serving version is over a 0 ms budget too, but that lets in no candidate that does not beat it:
    # allocation refuses (the same weights), the reason says the serving version is over the budget, latency refuses
    assert worse.status == "rejected" and worse.reason.startswith("allocation: not better than serving bad")
    assert "; the serving version bad is over the latency budget" in worse.reason
    assert worse.reason.endswith("> budget 0 ms") and (root / "latest").resolve() == (root / "bad").resolve()
    unbounded = _run(trained["good-twin"], root, archive, latency_budget_ms=None)
    assert unbounded.promoted and "(no budget)" in unbounded.reason


def test_a_candidate_whose_version_name_is_taken_in_the_root_is_refused_before_evaluation(trained, archive, tmp_path):
    root = tmp_path / "models"
    _serve(trained, "good", root)
    (root / "bad").mkdir()  # another directory under the candidate's version name
    with pytest.raises(FileExistsError, match="version names must be unique"):
        _run(trained["bad"], root, archive)
    assert get_version(archive, "bad") is None and not any((root / "bad").iterdir())


def test_a_promotion_that_another_one_overtook_during_its_evaluation_is_not_served(trained, archive, tmp_path,
                                                                                   monkeypatch):  # fmt: skip
    """Found by review: two promotions compared with the same serving version; the later one to
    finish repointed latest though it was compared with a version that no longer served."""
    import inference.training.promotion as promotion

    root = tmp_path / "models"
    _serve(trained, "bad", root)
    evaluate = promotion.evaluate_held_out

    def meanwhile(candidate, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if Path(candidate).name == "good":  # another run promotes good-twin while good is evaluated
            shutil.copytree(trained["good-twin"], root / "good-twin")
            point_latest(root, "good-twin")
        return evaluate(candidate, *a, **kw)

    monkeypatch.setattr(promotion, "evaluate_held_out", meanwhile)
    r = _run(trained["good"], root, archive)
    assert r.status == "rejected" and "good-twin serves now, not bad" in r.reason, r.reason
    assert (root / "latest").resolve() == (root / "good-twin").resolve() and not (root / "good").exists()
    assert get_version(archive, "good").status == "rejected"
    assert (root / ".promote.lock").exists()


def test_the_promotion_says_when_a_running_server_cannot_swap_the_version_in(tmp_path):
    """Found by review: an archive-trained version (no cost or transition head) promoted over one
    with them moved latest, and a running server kept the old one without the registry saying so."""
    from inference.model import Scorer
    from inference.training.promotion import hot_swap_note

    plain = save_model(tmp_path / "plain", Scorer(CONFIG), "plain")
    twin = save_model(tmp_path / "twin", Scorer(CONFIG), "twin")
    headed = save_model(tmp_path / "headed", Scorer(ModelConfig(spec=SPEC, hidden=16, depth=2, knn=3, head_hidden=16,
                                                                cost_dim=2, transition=True)), "headed")  # fmt: skip
    assert hot_swap_note(twin, plain) == "" and hot_swap_note(plain, None) == ""
    note = hot_swap_note(plain, headed)
    assert "restart semsched serve" in note and "COST" in note and "keeps serving headed" in note, note


def test_promote_itself_refuses_a_candidate_trained_on_its_replays_seeds(trained, archive, tmp_path):
    """The gate is in promote, not only in the CLI that calls it (found re-reading the change: the
    library's promote never passed the replay's seeds to the check)."""
    leaky = tmp_path / "leaky"
    shutil.copytree(trained["good"], leaky)
    (leaky / "train.json").write_text(json.dumps({"train_seeds": [0, REPLAY.seeds[0]], "val_seeds": [1]}))
    root = tmp_path / "models"
    with pytest.raises(ValueError, match="held-out replay"):
        _run(leaky, root, archive)
    assert not (root / "latest").exists() and get_version(archive, "good") is None


def test_a_serving_version_trained_on_the_replays_seeds_is_not_compared_there(trained, archive, tmp_path):
    """Its score on seeds it learned from would be inflated, and would keep honest candidates out (found by
    review: only the candidate was checked)."""
    root = tmp_path / "models"
    _serve(trained, "bad", root)
    (root / "bad" / "train.json").write_text(json.dumps({"train_seeds": [0, REPLAY.seeds[1]], "val_seeds": [1]}))
    with pytest.raises(ValueError, match="the serving version .* fill seeds \\[101\\]"):
        _run(trained["good"], root, archive)
    assert (root / "latest").resolve() == (root / "bad").resolve()


def test_a_copy_cut_short_leaves_no_half_version_and_the_next_promotion_installs_it_whole(tmp_path, monkeypatch):
    """Found by review: the candidate was copied straight into ``<models>/<version>``, so a process dying
    mid-copy left a half version there, which every later promotion refused as a name taken."""
    import inference.training.promotion as promotion

    candidate = tmp_path / "candidates" / "v2"
    candidate.mkdir(parents=True)
    (candidate / "config.json").write_text("{}")
    (candidate / "model.pt").write_bytes(b"weights")
    real = shutil.copy2

    def dies_at_the_weights(src, dst, **kwargs):
        if str(src).endswith("model.pt"):
            raise KeyboardInterrupt("killed mid-copy")
        return real(src, dst, **kwargs)

    copytree = shutil.copytree
    monkeypatch.setattr(promotion.shutil, "copytree",
                        lambda a, b, **kw: copytree(a, b, **(kw | {"copy_function": dies_at_the_weights})))  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        promotion._install(candidate, tmp_path / "models" / "v2")
    assert not (tmp_path / "models" / "v2").exists() and list((tmp_path / "models").iterdir()) == []
    monkeypatch.setattr(promotion.shutil, "copytree", copytree)
    promotion._install(candidate, tmp_path / "models" / "v2")
    assert sorted(p.name for p in (tmp_path / "models" / "v2").iterdir()) == ["config.json", "model.pt"]
    assert (tmp_path / "models" / "v2" / "model.pt").read_bytes() == b"weights"


@pytest.mark.parametrize("damage", ["train.json", "config.json"])
def test_a_damaged_serving_version_is_replaced_not_a_traceback(trained, archive, tmp_path, damage):
    """Found by review: a serving version whose train.json (which loading does not need) or config.json no
    longer reads made every promotion end in a traceback, after the whole training run."""
    root = tmp_path / "models"
    _serve(trained, "bad", root)
    path = root / "bad" / damage
    path.write_text("{" if damage == "train.json" else json.dumps({"model": {}}))  # cut short; no version
    r = _run(trained["good"], root, archive)
    assert r.promoted and r.serving_version == "bad" and (root / "latest").resolve() == (root / "good").resolve()
    assert get_version(archive, "good").status == "promoted"


def test_a_latest_that_is_not_a_symlink_is_refused_before_the_evaluation(trained, archive, tmp_path, monkeypatch):
    import inference.training.promotion as promotion

    root = tmp_path / "models"
    shutil.copytree(trained["bad"], root / "latest")  # a model copied there by hand
    monkeypatch.setattr(promotion, "evaluate_held_out", lambda *a, **kw: pytest.fail("evaluated"))
    with pytest.raises(ValueError, match="not a symlink"):
        _run(trained["good"], root, archive)
    assert get_version(archive, "good") is None and not list(root.glob(".latest-*"))


def test_a_recorded_evaluation_of_another_model_under_the_serving_versions_name_is_not_reused(trained, archive,
                                                                                              tmp_path):  # fmt: skip
    """Found by review: the registry is shared by every models root, and a recorded evaluation was reused by
    version name alone: the bad model recorded as "good" in a scratch root made the good model's own twin
    look 16 points better than the good model serving in the real root, and it was promoted."""
    scratch, real = tmp_path / "scratch", tmp_path / "models"
    shutil.copytree(trained["bad"], scratch / "good")  # the bad weights, under the name "good"
    config = json.loads((scratch / "good" / "config.json").read_text())
    (scratch / "good" / "config.json").write_text(json.dumps(config | {"version": "good"}))
    point_latest(scratch, "good")
    _run(trained["good-twin"], scratch, archive)  # records "good" (the bad weights) as the serving version
    assert get_version(archive, "good") is not None
    _serve(trained, "good", real)
    r = _run(trained["good-twin"], real, archive)  # the good weights against the good weights
    assert r.status == "rejected" and "reused_from_registry" not in (r.serving or {})
    assert r.serving["score"] == pytest.approx(r.candidate["score"])  # type: ignore[index]


def test_a_candidate_another_run_promoted_meanwhile_is_not_recorded_as_rejected(trained, archive, tmp_path,
                                                                                monkeypatch):  # fmt: skip
    import inference.training.promotion as promotion

    root = tmp_path / "models"
    _serve(trained, "good", root)
    evaluate = promotion.evaluate_held_out

    def meanwhile(candidate, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if Path(candidate).name == "bad" and not (root / "bad").exists():  # another run promotes this candidate
            shutil.copytree(trained["bad"], root / "bad")
            point_latest(root, "bad")
        return evaluate(candidate, *a, **kw)

    monkeypatch.setattr(promotion, "evaluate_held_out", meanwhile)
    r = _run(trained["bad"], root, archive)
    assert r.promoted and r.reason.startswith("already serving") and "not better than serving good" in r.reason
    assert get_version(archive, "bad").status == "promoted" and r.latest == "bad"


def test_an_interrupted_evaluation_is_recorded_as_such(trained, archive, tmp_path, monkeypatch):
    import inference.training.promotion as promotion

    def interrupted(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(promotion, "evaluate_held_out", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(trained["good"], tmp_path / "models", archive)
    row = get_version(archive, "good")
    assert row.status == "candidate" and row.reason == "evaluation interrupted: KeyboardInterrupt: "


def test_a_version_name_the_registry_holds_for_another_model_is_refused(trained, archive, tmp_path):
    """Found by review: ``model_versions`` is shared by every host and models root, one row per version name;
    another host's promoted ``v1`` became this host's unevaluated candidate ``v1`` (its row replaced). The same
    model recorded again (its candidate row, then its promotion) is no clash."""
    from inference.training.promotion import record_candidate

    record_candidate(trained["good"], ArchiveRegistry(archive), "written by another host")
    other = tmp_path / "elsewhere" / "good"  # another model under the same name
    shutil.copytree(trained["bad"], other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"version": "good"}))
    train = json.loads((other / "train.json").read_text())
    (other / "train.json").write_text(json.dumps(train | {"version": "good"}))
    with pytest.raises(FileExistsError, match="model_versions holds good for another model"):
        record_candidate(other, ArchiveRegistry(archive), "not evaluated")
    with pytest.raises(FileExistsError, match="model_versions holds good for another model"):
        _run(other, tmp_path / "models", archive)
    row = get_version(archive, "good")
    assert row.reason == "written by another host" and row.path == str(trained["good"].resolve())
    assert _run(trained["good"], tmp_path / "models", archive).status == "promoted"  # itself: first version


def test_a_replay_where_the_fallback_scored_any_pod_is_not_the_models_evaluation(trained):
    """Found by review: a call that failed mid-replay handed that pod to the fallback, the next pod's answered
    call set last_step back, and the heuristic's placements counted as the model's (51 pods in the probe)."""
    from inference.backends import BackendError
    from inference.policy import LearnedPolicy

    policy = LearnedPolicy(trained["good"], fallback="best-fit")
    inner, calls = policy.backend.policy, [0]

    def every_third_fails(inputs, **kw):  # noqa: ANN001, ANN202
        calls[0] += 1
        if calls[0] % 3 == 0:
            raise BackendError("a hiccup")
        return inner(inputs, **kw)

    policy.backend.policy = every_third_fails
    ev = evaluate_held_out(policy, NODES, PODS, REPLAY)
    assert ev["loaded"] is False and ev["score"] is None and "the fallback scored" in ev["error"], ev
