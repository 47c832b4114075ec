"""``bench damping`` on the openb excerpt: a table of the model step with and without Δ."""

from __future__ import annotations

import json
from pathlib import Path

from ops.bench.damping import run_damping_bench

OPENB = Path(__file__).parents[2] / "fixtures" / "traces" / "alibaba-gpu-2023"


def test_times_the_model_step_of_each_stability(tmp_path: Path) -> None:
    assert run_damping_bench(stabilities=[0.0, 0.5], pending=8, repeat=2, hidden=8, out_dir=tmp_path, command="x",
                             pods=OPENB / "openb_pod_list_default.csv",
                             nodes=OPENB / "openb_node_list_gpu_node.csv") == 0  # fmt: skip
    rows = json.loads((tmp_path / "bench-damping.json").read_text())["rows"]
    assert [r["stability"] for r in rows] == [0.0, 0.5] and all(r["p50 ms"] > 0 and r["p99 ms"] >= r["p50 ms"]
                                                                for r in rows)  # fmt: skip
    assert "| 0.5 |" in (tmp_path / "bench-damping.md").read_text()
