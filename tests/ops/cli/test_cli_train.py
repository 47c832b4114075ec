"""``semsched train`` (ops/cli/train.py): the parts that need no full training run."""

import sys
from pathlib import Path

import pytest
import typer

sys.path.insert(0, str(Path(__file__).parents[2] / "inference"))
from inference_helpers import pod_mix  # noqa: E402

from inference.training.lookahead import LookaheadTeacher  # noqa: E402
from ops.cli.train import expert_factory, run_train  # noqa: E402


def test_experts_are_built_per_seed():
    pods = pod_mix(50)
    fgd = expert_factory("fgd", pods)
    assert fgd(0) is not fgd(0) and fgd(0).name == "fgd"
    teacher = expert_factory("lookahead", pods, 56_000)(3)
    assert isinstance(teacher, LookaheadTeacher) and teacher.base.name == "fgd"
    with pytest.raises(ValueError, match="capacity"):
        expert_factory("lookahead", pods)


@pytest.mark.parametrize("where", ["train", "val", "dagger"])
def test_held_out_seeds_are_refused_everywhere(where, tmp_path):
    seeds = {"train_seeds": [0], "val_seeds": [1], "dagger_seeds": [2]}
    seeds[f"{where}_seeds"] = [44]
    with pytest.raises(typer.BadParameter, match="held-out"):
        run_train(expert="fgd", rate=0.01, epochs=1, batch=4, lr=1e-3, hidden=8, depth=2, text_dim=8, seed=0,
                  out=tmp_path, version=None, dagger_rounds=1, **seeds)  # fmt: skip
    assert not any(tmp_path.iterdir())


def test_the_promotion_replays_seeds_are_refused_for_training(tmp_path):
    with pytest.raises(typer.BadParameter, match="promotion"):
        run_train(expert="fgd", rate=0.01, epochs=1, batch=4, lr=1e-3, hidden=8, depth=2, text_dim=8, seed=0,
                  out=tmp_path, version=None, train_seeds=[0, 101], val_seeds=[1])  # fmt: skip
    assert not any(tmp_path.iterdir())


# -- RL fine-tuning (ops/cli/train_rl.py) -------------------------------------------------------------
OPENB = Path(__file__).parents[3] / ".." / "shared" / "data" / "traces" / "alibaba-gpu-2023"


def tiny_openb(tmp_path: Path) -> tuple[Path, Path]:
    """Every 40th GPU node of openb and its first 150 pods, in the openb CSV format."""
    node_lines = (OPENB / "openb_node_list_gpu_node.csv").read_text().splitlines()
    pod_lines = (OPENB / "openb_pod_list_default.csv").read_text().splitlines()
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text("\n".join([node_lines[0], *node_lines[1::40]]) + "\n")
    pods.write_text("\n".join(pod_lines[:151]) + "\n")
    return pods, nodes


def test_rl_from_writes_a_loadable_model_with_the_rl_history(tmp_path):
    import json

    import torch

    from inference.features.spec import FeatureSpec
    from inference.model import ModelConfig, Scorer, save_model
    from inference.model.io import load_model
    from ops.cli.train import openb_fill_inputs
    from ops.cli.train_rl import rl_options, run_train_rl_from

    pods, nodes = tiny_openb(tmp_path)
    views, _ = openb_fill_inputs(pods, nodes)
    spec = FeatureSpec(gpu_models=tuple(sorted({n.gpu_model for n in views if n.gpu_model})), text_dim=8,
                       encoder="hashed-ngram-8", cluster=True)  # fmt: skip
    torch.manual_seed(0)
    source = save_model(tmp_path / "src", Scorer(ModelConfig(spec=spec, hidden=8, head_hidden=8, knn=3)), "src",
                        {"method": "imitation (test)", "train_seeds": [0]})  # fmt: skip
    opts = rl_options(episodes=1, seeds=[3], rate=1e-3, temperature=1.0, samples=1, minutes=None, kl=0.05,
                      state_rate=0.5, seed=0)  # fmt: skip
    out = run_train_rl_from(source, options=opts, out=tmp_path / "models", version="rl-test", pods=pods, nodes=nodes)
    assert out == tmp_path / "models" / "rl-test"
    loaded = load_model(out)
    assert loaded.version == "rl-test"
    info = json.loads((out / "train.json").read_text())
    assert info["rl_from"]["version"] == "src" and info["train_seeds"] == [0] and "RL" in info["method"]
    assert len(info["rl"]["episodes"]) == 1 and info["rl"]["episodes"][0]["seed"] == 3
    # a fine-tune of the fine-tune keeps the first one's record, seeds included (found by review: they were
    # replaced, and promotion's leak check did not see them)
    from inference.training.promotion import trained_seeds

    again = run_train_rl_from(out, options=rl_options(episodes=1, seeds=[4], rate=1e-3, temperature=1.0, samples=1,
                                                      minutes=None, kl=0.05, state_rate=0.5, seed=0),
                              out=tmp_path / "models", version="rl-again", pods=pods, nodes=nodes)  # fmt: skip
    twice = json.loads((again / "train.json").read_text())
    assert twice["rl_from"]["version"] == "rl-test" and twice["rl_from"]["rl"]["episodes"][0]["seed"] == 3
    assert trained_seeds(info) <= trained_seeds(twice) and 4 in trained_seeds(twice)
    # nor on the seeds the source was validated on (found by review: only the CLI's --val-seeds were checked)
    import typer

    (source / "train.json").write_text(json.dumps({"train_seeds": [0], "val_seeds": [5, 6]}))
    with pytest.raises(typer.BadParameter, match=r"--rl-seeds \[5\] validated src"):
        run_train_rl_from(source, options=rl_options(episodes=1, seeds=[3, 5], rate=1e-3, temperature=1.0, samples=1,
                                                     minutes=None, kl=0.05, state_rate=0.5, seed=0),
                          out=tmp_path / "models", version="rl-val", pods=pods, nodes=nodes)  # fmt: skip


@pytest.mark.parametrize("args, message", [
    (["--rl-episodes", "1", "--rl-seeds", "0,44"], "held out"),
    (["--rl-episodes", "1", "--rl-seeds", "102"], "held out"),
    ([], "--rl-episodes"),
])  # fmt: skip
def test_rl_refuses_held_out_seeds_and_needs_episodes(tmp_path, args, message):
    from typer.testing import CliRunner

    from ops.cli.main import app

    result = CliRunner().invoke(app, ["train", "--rl-from", str(tmp_path / "none"), "--no-promote",
                                      "--out", str(tmp_path / "m"), *args])  # fmt: skip
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("args, option", [
    (["--head-rank", "-1"], "--head-rank"),
    (["--depth", "11"], "--depth"),
    (["--head-layers", "3"], "--head-layers"),
])  # fmt: skip
def test_an_impossible_architecture_is_refused_before_any_work(tmp_path, args, option):
    from typer.testing import CliRunner

    from ops.cli.main import app

    result = CliRunner().invoke(app, ["train", "--no-promote", "--out", str(tmp_path / "m"), *args])
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in " ".join(result.output.split())
    assert not (tmp_path / "m").exists()


def test_the_printed_agreement_says_which_model_it_describes(tmp_path, capsys):
    """After DAgger the saved model is not the imitation's: its numbers are printed as the imitation's,
    beside the last round's (found by review: printed as the saved model's)."""
    import json

    pods, nodes = tiny_openb(tmp_path)
    run_train(expert="best-fit", rate=0.3, epochs=1, batch=4, lr=1e-3, hidden=8, depth=2, text_dim=8, seed=0,
              out=tmp_path / "m", version="dg", train_seeds=[0], val_seeds=[1], dagger_rounds=1, dagger_seeds=[2],
              dagger_epochs=1, pods=pods, nodes=nodes, job_tokens=0)  # fmt: skip
    line = next(json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{"))
    assert "imitation_val_agreement" in line and "val_agreement" not in line and "dagger_val_agreement" in line


def test_a_latest_that_is_not_a_symlink_is_refused_before_any_work_when_promotion_would_repoint_it(tmp_path):
    """(Found by review: promotion would fail to repoint it with an OSError, after the whole training.) With
    --no-promote latest is not touched, so it is no reason to refuse."""
    from typer.testing import CliRunner

    from ops.cli.main import app

    (tmp_path / "m" / "latest").mkdir(parents=True)
    bad = ["--target", "nope"]  # refused after the latest check: no training either way
    result = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "m"), *bad], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "is a directory, not a symlink" in result.output, result.output
    result = CliRunner().invoke(app, ["train", "--no-promote", "--out", str(tmp_path / "m"), *bad], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "--target must be" in result.output, result.output
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["latest"]
