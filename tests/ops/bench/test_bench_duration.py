"""`semsched bench duration` (ops/bench/duration.py) on a Google 2011 slice, hashed encoder: every
predictor's row, the split, and the censored rows (jobs still running at the cut) in the model."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from ops.cli.bench_duration import duration


def _run(tmp_path: Path, *extra: str) -> dict:
    app = typer.Typer()
    app.command()(duration)
    r = CliRunner().invoke(app, ["--traces", "google2011", "--encoders", "hashed", "--limit", "3000", "--epochs", "3",
                                 "--train-fraction", "0.6", "--out", str(tmp_path), *extra])  # fmt: skip
    assert r.exit_code == 0, r.output
    return json.loads((tmp_path / "bench-duration.json").read_text())["google2011"]


def test_bench_duration_rows_and_censored_training(tmp_path: Path) -> None:
    data = _run(tmp_path)
    rows = {(r["encoder"], r["predictor"]): r for r in data["rows"]}
    assert set(rows) == {("–", "history"), ("–", "constant"), ("hashed", "regression"), ("hashed", "retrieval"),
                         ("hashed", "pair"), ("hashed", "blend")}  # fmt: skip
    split = data["split"]
    for r in rows.values():
        assert r["held_out"] == split["test"] and 0 <= r["within_2x"] <= 1 and 0 <= r["within_100pct"] <= 1
    assert data["censored"] and split["late"] > 0
    # every job running at the cut is a lower bound: the late ones (they finish later in the trace) and
    # those that never finish in it (found by review: only the late ones were, future information)
    assert split["running_at_cut"] > split["late"]
    assert data["trained"]["hashed"]["running"] == split["running_at_cut"]
    # the held-out jobs no row scores (no run time in the trace) are counted (found by review: not said)
    unscored = split["unscored_held_out"]
    assert unscored["started"] > 0 and unscored["median_elapsed_s"] > 0 and unscored["never_started"] >= 0
    assert f"Not scored: {unscored['started']:,} that started" in (tmp_path / "bench-duration.md").read_text()
    plain = _run(tmp_path / "plain", "--no-censored")
    assert not plain["censored"] and plain["trained"]["hashed"]["running"] == 0
