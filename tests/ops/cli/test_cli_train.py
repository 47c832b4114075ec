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
