"""``bench fill`` end to end on a tiny pod list: the report beside the authors' figures."""

from __future__ import annotations

import json
from pathlib import Path

from ops.bench.fill import REFERENCE, run_fill_bench

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,65536,2,T4\n" for i in range(4))
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
              "deletion_time,scheduled_time\n")  # fmt: skip


def test_writes_markdown_json_and_plot_with_the_reference_beside(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    pods = "".join(f"p{i:02d},1000,1024,1,{(300, 500, 1000)[i % 3]},,BE,Running,{i},,\n" for i in range(12))
    (tmp_path / "pods.csv").write_text(POD_HEADER + pods)
    out = tmp_path / "out"
    assert run_fill_bench(pods=tmp_path / "pods.csv", nodes=tmp_path / "nodes.csv", policies=["fgd", "random"],
                          seeds=[1, 2], out_dir=out) == 0  # fmt: skip
    result = json.loads((out / "bench-fill.json").read_text())
    rows = {r["policy"]: r for r in result["policies"]}
    assert rows["fgd"]["theirs"] == "FGD" and rows["fgd"]["theirs %"] == REFERENCE["fgd"][1]
    assert rows["fgd"]["Δ pp"] == rows["fgd"]["ours %"] - REFERENCE["fgd"][1]
    assert 0 < rows["random"]["ours %"] <= 100
    assert len(result["runs"]) == 4 and len(result["runs"][0]["curve"]) == 130
    assert (out / "bench-fill-allocation.png").stat().st_size > 0
    assert "| fgd | FGD |" in (out / "bench-fill.md").read_text()


def test_the_learned_policy_without_a_model_is_refused_not_run_as_its_fallback(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(tmp_path / "no-model-here"))
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(POD_HEADER + "p00,1000,1024,1,500,,BE,Running,0,,\n")
    out = tmp_path / "out"
    assert run_fill_bench(pods=tmp_path / "pods.csv", nodes=tmp_path / "nodes.csv", policies=["learned", "fgd"],
                          seeds=[1], out_dir=out) == 2  # fmt: skip
    assert not (out / "bench-fill.json").exists()


def test_the_default_list_leaves_the_learned_policies_out_without_a_model_and_says_so(tmp_path: Path,
                                                                                      monkeypatch) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    from typer.testing import CliRunner

    from ops.cli.main import app

    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(tmp_path / "no-model-here"))
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(POD_HEADER + "p00,1000,1024,1,500,,BE,Running,0,,\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "fill", "--pods", str(tmp_path / "pods.csv"), "--nodes",
                                      str(tmp_path / "nodes.csv"), "--seeds", "1", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "leaving out learned, learned-lookahead" in result.output and "no model" in result.output
    ran = {r["policy"] for r in json.loads((out / "bench-fill.json").read_text())["policies"]}
    assert "fgd" in ran and not ran & {"learned", "learned-lookahead"}


def test_seeds_the_learned_model_trained_on_are_named_in_the_report(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """(Found by review: ``bench fill`` on the model's training seeds said nothing; its numbers there
    are inflated.)"""
    from tests.ops.bench.test_bench_model_check import publish

    publish(tmp_path / "models", "v1")
    train = {"train_seeds": [2, 3], "val_seeds": [4], "held_out_seeds": [1]}
    (tmp_path / "models" / "v1" / "train.json").write_text(json.dumps(train))
    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(tmp_path / "models" / "latest"))
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(POD_HEADER + "p00,1000,1024,1,500,,BE,Running,0,,\n")
    for seeds, warned in (([1, 2, 4], "[2, 4]"), ([1, 5], None)):
        out = tmp_path / f"out-{len(seeds)}"
        assert run_fill_bench(pods=tmp_path / "pods.csv", nodes=tmp_path / "nodes.csv", policies=["learned"],
                              seeds=seeds, out_dir=out) == 0  # fmt: skip
        text = (out / "bench-fill.md").read_text()
        assert ("trained or validated on seeds" in text) == (warned is not None)
        assert warned is None or f"seeds {warned}: its numbers on them are inflated" in text
