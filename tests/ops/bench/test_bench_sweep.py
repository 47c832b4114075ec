import json

from typer.testing import CliRunner

from ops.cli.main import app


def test_bench_sweep_runs_each_sweep_per_policy_and_plots(tmp_path):
    result = CliRunner().invoke(app, ["bench", "sweep", "--limit", "300", "--policies", "fifo-first-fit,best-fit",
                                      "--sweeps", "step,heterogeneity", "--steps", "1,8", "--base-load", "high",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "bench-sweep-openb.json").read_text())
    step_rows = data["sweeps"]["step"]
    assert [(r["policy"], r["x"]) for r in step_rows] == [("fifo-first-fit", 1), ("best-fit", 1),
                                                          ("fifo-first-fit", 8), ("best-fit", 8)]  # fmt: skip
    by = {(r["policy"], r["x"]): r for r in step_rows}
    # a coarser step can only delay placements: mean queueing delay does not shrink
    assert by[("best-fit", 8)]["queue_mean"] >= by[("best-fit", 1)]["queue_mean"]
    assert len(data["sweeps"]["heterogeneity"]) == 2 * 4
    assert (tmp_path / "bench-sweep-openb-step-queue_mean.png").exists()
    assert "load" not in data["sweeps"]


def test_bench_sweep_rejects_an_unknown_sweep(tmp_path):
    result = CliRunner().invoke(app, ["bench", "sweep", "--sweeps", "weather", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "weather" in result.output
