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


def test_a_model_that_does_not_load_or_a_workspace_that_cannot_be_made_exits_2_without_a_traceback(tmp_path, caplog):
    """Found by review: a config.json that does not parse (or an unknown format, or no weights) and a
    workspace under a file raised out of `semsched serve` as tracebacks; nothing is started for either."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{garbage")
    result = runner.invoke(app, ["serve", "--model", str(broken), "--workspace", str(tmp_path / "ws0")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert f"the model at {broken} does not load" in caplog.text and f"{broken}/config.json: not JSON" in caplog.text
    assert not (tmp_path / "ws0").exists()  # nothing made: the same command works once the model does
    save_model(tmp_path / "m", Scorer(ModelConfig()), "v1")
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "m"), "--workspace", str(tmp_path / "file" / "ws")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert "cannot make the workspace" in caplog.text


def test_a_duration_model_that_does_not_load_exits_2_before_anything_starts(tmp_path):
    """Found by review: only its config.json's existence was checked, and a corrupt one was served, as NaN."""
    save_model(tmp_path / "m", Scorer(ModelConfig()), "v1")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text('{"hidden": ')
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "m"), "--duration", str(tmp_path / "d")])
    assert result.exit_code == 2 and "the duration model in" in result.output and "does not load" in result.output


def test_one_port_for_two_endpoints_exits_2_before_anything_starts(tmp_path, monkeypatch):
    """Found by review: each port was checked free on its own, so --grpc-port, --http-port and --metrics-port
    all 18555 passed, and tritonserver failed to bind only after the models had loaded."""
    started: list[object] = []
    monkeypatch.setattr("inference.serving.server.serve", lambda options: started.append(options) or 0)
    save_model(tmp_path / "m", Scorer(ModelConfig()), "v1")
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "m"), "--grpc-port", "18555", "--http-port",
                                 "18555", "--metrics-port", "18556"])  # fmt: skip
    assert result.exit_code == 2 and "must differ" in result.output and started == [], result.output
