"""`semsched serve` refuses to start without a model (ops/cli/serve.py); serving itself is
tested against a real tritonserver in tests/inference/serving."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from inference.model import ModelConfig, Scorer, save_model
from ops.cli.serve import serve_command

app = typer.Typer()
app.command("serve")(serve_command)
app.command("other")(lambda: None)  # two commands: `serve` stays a sub-command
runner = CliRunner()


def test_a_missing_model_dir_exits_2_with_a_clear_message(tmp_path):
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    assert "no model in" in result.output and "semsched train" in result.output


def test_a_missing_duration_model_exits_2(tmp_path):
    save_model(tmp_path / "m", Scorer(ModelConfig()), "v1")
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "m"), "--duration", str(tmp_path / "none")])
    assert result.exit_code == 2 and "no duration model" in result.output


def test_an_existing_workspace_exits_2_before_anything_starts(tmp_path):
    """Found by review: a second `serve --workspace DIR` (the first keeps DIR) ended in a FileExistsError traceback."""
    save_model(tmp_path / "m", Scorer(ModelConfig()), "v1")
    (tmp_path / "ws").mkdir()
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "m"), "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 2 and "exists already" in result.output, result.output
