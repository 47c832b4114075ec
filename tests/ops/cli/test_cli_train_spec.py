"""``semsched train --encoder hashed|minilm`` (ops/cli/train_spec.py): the spec names the encoder
by its own name and size, and a model trained with MiniLM (a tiny run: 12 nodes, 20 pods, about
15 s with MiniLM on the CPU) loads and decides a step with MiniLM's vectors, without falling back."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from inference.encoders.minilm import MiniLMEncoder
from ops.cli.main import app
from ops.cli.train import openb_fill_inputs
from ops.cli.train_spec import policy_spec
from storage.client import close_client
from tests.ops.cli.tiny_train import TINY, tiny_inputs


@pytest.fixture
def tiny(tmp_path):  # noqa: ANN001, ANN201
    inputs = tiny_inputs(tmp_path)
    yield inputs
    close_client(str(inputs["dsn"]))


def test_the_spec_records_the_encoders_own_name_and_size(tiny) -> None:
    nodes, pods = openb_fill_inputs(tiny["pods"], tiny["nodes"])
    spec, text = policy_spec(nodes, pods, encoder="hashed", text_dim=16)
    assert (spec.encoder, spec.text_dim, text.dim) == ("hashed-ngram-16", 16, 16) and spec.gpu_models == ("T4",)
    with pytest.raises(typer.BadParameter, match="hashed, minilm"):
        policy_spec(nodes, pods, encoder="bert")


def test_a_minilm_model_is_trained_loads_and_decides_a_step_with_minilm(tiny) -> None:
    from inference.model.io import load_model
    from inference.policy import LearnedPolicy
    from scheduling.assign import schedule_step
    from scheduling.snapshot import ClusterSnapshot

    models = tiny["models"]
    r = CliRunner().invoke(app, ["train", *TINY, "--encoder", "minilm", "--pods", str(tiny["pods"]), "--nodes",
                                 str(tiny["nodes"]), "--no-promote", "--archive", tiny["dsn"], "--out", str(models),
                                 "--version", "mini"])  # fmt: skip
    assert r.exit_code == 0, r.output
    spec = load_model(models / "mini").config.spec
    assert (spec.encoder, spec.text_dim) == (MiniLMEncoder.name, MiniLMEncoder.dim)  # --text-dim 8 applies to hashed only
    assert json.loads((models / "mini" / "train.json").read_text())["encoder"] == "all-MiniLM-L6-v2"

    nodes, pods = openb_fill_inputs(tiny["pods"], tiny["nodes"])
    policy = LearnedPolicy(models / "mini", fallback="best-fit")
    assert not policy.fell_back, policy.fallback_reason
    result = schedule_step(ClusterSnapshot.from_nodes(nodes), pods[:8], policy, now=0.0)
    assert len(result.placements) == 8 and not policy.fallback_jobs and not policy.last_step.fallback
    assert policy.model_version == "mini" and isinstance(policy.encoder().encoder, MiniLMEncoder)


def test_minilm_is_refused_where_the_encoder_is_not_chosen_here(tmp_path) -> None:
    """--rl-from keeps its model's encoder (--from-archive takes --encoder: test_archive_training.py)."""
    r = CliRunner().invoke(app, ["train", "--encoder", "minilm", "--rl-from", "models/x", "--rl-episodes", "1",
                                 "--no-promote", "--out", str(tmp_path / "m")])  # fmt: skip
    assert r.exit_code == 2 and "--encoder applies to a new model" in " ".join(r.output.split())
    assert not (tmp_path / "m").exists()
