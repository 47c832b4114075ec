"""`semsched train-duration` (ops/cli/train_duration.py) on a slice of the real Google 2011
trace with the hashed encoder: a version directory that loads, ``latest`` pointing at it and
moving to the next version, the training period kept before the cut."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from inference.duration.io import load_predictor
from ops.cli.train_duration import train_duration

runner = CliRunner()
ARGS = ["--trace", "google2011", "--encoder", "hashed", "--limit", "3000", "--epochs", "4"]


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(train_duration)
    return app


def test_train_duration_writes_a_version_and_repoints_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ops.cli.train_duration.console", Console(width=40))  # a narrow terminal
    out = tmp_path / "duration"
    first = runner.invoke(_app(), [*ARGS, "--out", str(out), "--version", "v1", "--train-fraction", "0.6"])
    assert first.exit_code == 0, first.output
    summary = json.loads(next(line for line in first.stdout.splitlines() if line.startswith("{")))  # one line, for jq
    assert summary["version"] == "v1" and summary["jobs"] > 0
    assert os.readlink(out / "latest") == "v1"  # relative: the root can move
    model = load_predictor(out / "latest")
    assert model.version == "v1" and model.config.encoder == "hashed-ngram-64"
    info = json.loads((out / "v1" / "config.json").read_text())["config"]["train_info"]
    assert info["trace"] == "google2011" and info["train_fraction"] == 0.6
    assert info["train"] == len(model.index) and 0 < info["train"] < 3000
    assert info["held_out"] > 0 and info["cut_s"] > 0
    assert model.predict(_a_job()) is not None

    second = runner.invoke(_app(), [*ARGS, "--out", str(out), "--version", "v2", "--train-fraction", "1"])
    assert second.exit_code == 0, second.output
    assert os.readlink(out / "latest") == "v2" and (out / "v1" / "config.json").exists()
    grown = load_predictor(out / "latest")
    assert len(grown.index) > len(model.index)  # every job with a run time, not only those before the cut
    assert grown.config.train_info["cut_s"] is None


def test_train_duration_refuses_unknown_trace_and_fraction(tmp_path: Path) -> None:
    bad = runner.invoke(_app(), ["--trace", "nope", "--out", str(tmp_path)])
    assert bad.exit_code != 0 and not (tmp_path / "latest").exists()
    bad = runner.invoke(_app(), ["--trace", "openb", "--train-fraction", "1.5", "--out", str(tmp_path)])
    assert bad.exit_code != 0 and not (tmp_path / "latest").exists()


def _a_job():  # noqa: ANN202
    from ops.bench.duration import load_finished

    return load_finished("google2011", limit=3000)[-1].job


def test_train_duration_refuses_a_latest_that_is_not_a_symlink_before_any_work(tmp_path: Path) -> None:
    """(Found by review: it trained, saved the version, and then failed to repoint ``latest`` with an OSError.)"""
    out = tmp_path / "duration"
    (out / "latest").mkdir(parents=True)
    r = runner.invoke(_app(), [*ARGS, "--out", str(out)], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "is a directory, not a symlink" in r.output, r.output
    assert sorted(p.name for p in out.iterdir()) == ["latest"]  # nothing trained, nothing written


def test_train_duration_refuses_a_negative_limit(tmp_path: Path) -> None:
    """(Found by review: with --trace archive, -5 trained on all but the latest 5 jobs and exited 0.)"""
    r = runner.invoke(_app(), ["--trace", "archive", "--limit", "-5", "--out", str(tmp_path / "d")], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "--limit" in r.output, r.output
    assert not (tmp_path / "d").exists()


def test_a_bad_trace_line_exits_1_and_a_trace_without_jobs_is_named(tmp_path: Path) -> None:
    """Found by review: a bad line exited 2 (replay, bench and train exit 1), and an empty Google 2011 task
    file said "need at least 2 finished jobs to split" without naming the file."""
    bad = tmp_path / "pods.csv"
    bad.write_text("name,cpu_milli\nx,1\n")
    r = runner.invoke(_app(), ["--trace", "openb", "--path", str(bad), "--out", str(tmp_path / "m")])
    assert r.exit_code == 1 and "bad trace line" in r.output and "pods.csv:1" in r.output, r.output
    empty = tmp_path / "task_events.csv"
    empty.write_text("")
    r = runner.invoke(_app(), ["--trace", "google2011", "--path", str(empty), "--out", str(tmp_path / "m")])
    assert r.exit_code == 2 and f"{empty}: need at least 2 finished jobs" in " ".join(r.output.split()), r.output


def test_training_on_every_job_learns_the_ones_still_running_at_the_end_as_lower_bounds() -> None:
    """Found by review: with --train-fraction 1 (a model trained to deploy) the jobs still running at the
    end of the data were dropped, so --censored did nothing there and the model was not the recipe measured."""
    from inference.duration.evaluate import Finished, Run
    from ops.cli.train_duration import training_records
    from scheduling.job import JobRequest

    def job(k: int) -> JobRequest:
        return JobRequest(job_id=f"j{k}", cpu_milli=100, submit_time=float(k))

    recs = [Finished(0, job(0), 5, 5), Finished(10, job(1), 30, 40)]
    runs = [Run(job(0), 0, 0, 5), Run(job(1), 10, 10, 40), Run(job(2), 12, 15, None), Run(job(3), 20, None, None)]
    train, running, facts = training_records(recs, 1.0, runs)
    assert [r.job.job_id for r in train] == ["j0", "j1"]
    assert [(j.job_id, started, elapsed) for j, started, elapsed in running] == [("j2", 15, 25)]  # until 40 s, the end
    assert facts["running"] == 1 and facts["end_s"] == 40
    assert training_records(recs, 1.0)[1] == []  # a source that does not say when its jobs ran: none
