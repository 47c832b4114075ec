"""``bench sweep --sweeps depth``: tiny models of depth 2 and 3, trained here with
``semsched train``'s own code on a tiny openb-format pod list, then swept end to end; and the
learned policy in the simulator sweeps, with its model version on its rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.cli.main import app
from ops.cli.train import run_train

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,65536,2,T4\n" for i in range(12))
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
              "deletion_time,scheduled_time\n")  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An openb-format node and pod list, and two models trained on it (depth 2 and 3)."""
    root = tmp_path_factory.mktemp("depth")
    (root / "nodes.csv").write_text(NODES)
    pods = "".join(f"p{i:02d},1000,1024,1,{(100, 200, 300)[i % 3]},,BE,Running,{i},,\n" for i in range(20))
    (root / "pods.csv").write_text(POD_HEADER + pods)
    out = {"pods": root / "pods.csv", "nodes": root / "nodes.csv"}
    for depth in (2, 3):
        out[f"d{depth}"] = run_train(expert="best-fit", train_seeds=[0, 1], val_seeds=[2], rate=1.0, epochs=1,
                                     batch=8, lr=1e-2, hidden=8, depth=depth, text_dim=8, seed=0,
                                     out=root / "models", version=f"depth-{depth}", head_hidden=8, head_layers=1,
                                     pods=root / "pods.csv", nodes=root / "nodes.csv", frag_features=False,
                                     cost_weight=0.0, transition_weight=0.0)  # fmt: skip
    return out


def test_the_depth_sweep_reports_one_row_per_model_with_its_depth_and_latency(tiny, tmp_path):
    models = f"{tiny['d3']},{tiny['d2']}"
    result = CliRunner().invoke(app, ["bench", "sweep", "--sweeps", "depth", "--models", models,
                                      "--fill-seeds", "42,43", "--fill-pods", str(tiny["pods"]),
                                      "--fill-nodes", str(tiny["nodes"]), "--pending", "16", "--repeat", "2",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "bench-sweep-depth.json").read_text())
    rows = data["sweeps"]["depth"]
    assert [(r["depth"], r["model"]) for r in rows] == [(2, "depth-2"), (3, "depth-3")]  # sorted by depth
    for r in rows:
        assert r["step p50 ms"] > 0 and r["step p99 ms"] >= r["step p50 ms"] and len(r["step_ms"]) == 2
        assert 0 < r["alloc %"] <= 100 and len(r["alloc_by_seed"]) == 2
    assert rows[1]["parameters"] > rows[0]["parameters"]  # one more fusion layer
    assert (tmp_path / "bench-sweep-depth-depth-allocation.png").stat().st_size > 0
    assert (tmp_path / "bench-sweep-depth-depth-latency.png").stat().st_size > 0
    assert "| 3 | depth-3 |" in (tmp_path / "bench-sweep-depth.md").read_text()


def test_the_depth_sweep_refuses_without_models_or_with_a_directory_that_is_no_model(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "sweep", "--sweeps", "depth", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--models" in result.output
    result = runner.invoke(app, ["bench", "sweep", "--sweeps", "depth", "--models", str(tmp_path), "--out",
                                 str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2 and "no model config" in result.output
    assert not (tmp_path / "bench-sweep-depth.json").exists()


def test_the_learned_rows_of_the_step_sweep_name_the_model_version(tiny, tmp_path):
    result = CliRunner().invoke(app, ["bench", "sweep", "--limit", "120", "--policies", "learned,best-fit",
                                      "--sweeps", "step", "--steps", "1,4", "--base-load", "high",
                                      "--model", str(tiny["d2"]), "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "bench-sweep-openb.json").read_text())
    assert data["learned_model"] == {"version": "depth-2", "dir": str(tiny["d2"].resolve())}
    rows = data["sweeps"]["step"]
    assert [(r["policy"], r["x"], r["model"]) for r in rows] == [("learned", 1, "depth-2"), ("best-fit", 1, ""),
                                                                 ("learned", 4, "depth-2"), ("best-fit", 4, "")]  # fmt: skip
    assert all(r["finished"] > 0 for r in rows)
    assert "model **depth-2**" in (tmp_path / "bench-sweep-openb.md").read_text()


def test_a_sweep_with_the_learned_policy_and_no_model_refuses_rather_than_report_its_fallback(tmp_path):
    result = CliRunner().invoke(app, ["bench", "sweep", "--limit", "50", "--policies", "learned", "--sweeps", "step",
                                      "--model", str(tmp_path / "nothing"), "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2 and "no model" in result.output
    assert not (tmp_path / "bench-sweep-openb.json").exists()
