"""``bench model-calls``: the learned policy's model calls on the worker's path, on a saturated
slice of the openb trace (20 of its nodes), with an untrained model made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, save_model
from ops.cli.main import app


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    spec = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")
    out = tmp_path_factory.mktemp("calls") / "m"
    save_model(out, Scorer(ModelConfig(spec=spec, hidden=8, depth=2)), "calls-v1")
    return out


def test_the_windowed_calls_cover_jobs_the_step_places_and_the_whole_queue_calls_every_step(model, tmp_path,
                                                                                           monkeypatch):  # fmt: skip
    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(model))
    result = CliRunner().invoke(app, ["bench", "model-calls", "--trace", "openb", "--limit", "150", "--nodes", "20",
                                      "--windows", "4,0", "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    windowed, whole = json.loads((tmp_path / "bench-model-calls-openb.json").read_text())["rows"]
    assert (windowed["window"], whole["window"]) == (4, "all")
    assert whole["steps"] == windowed["steps"] > whole["placing_steps"] > 0  # a saturated slice: steps place nothing
    # every step with a queue calls the model once with the whole queue: the unused calls are the idle steps'
    assert whole["in_step_calls"] == 0 and whole["prepared_calls"] - whole["placing_steps"] == whole["prepared_in_idle_steps"] > 0
    # a window holds jobs that fit somewhere: no call in a step that places nothing, none wasted on the head
    assert windowed["prepared_in_idle_steps"] == 0 and windowed["prepared_none_placed"] == 0
    assert windowed["prepared_calls"] == windowed["placing_steps"]
    assert windowed["in_step_calls"] > 0  # steps that place more than 4 jobs open windows
    assert "Model calls" in (tmp_path / "bench-model-calls-openb.md").read_text()


def test_a_policy_that_does_not_use_the_model_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["bench", "model-calls", "--policy", "best-fit", "--limit", "10",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2 and "does not place with the learned model" in result.output
    bad = CliRunner().invoke(app, ["bench", "model-calls", "--windows", "4,x", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--windows" in bad.output
