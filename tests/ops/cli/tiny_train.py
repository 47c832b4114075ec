"""Tiny openb-format inputs (12 two-GPU nodes, 20 pods) and the tiniest ``semsched train`` options
(those of tests/ops/bench/test_bench_sweep_depth.py), for CLI training runs of a few seconds."""

from __future__ import annotations

from pathlib import Path

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,65536,2,T4\n" for i in range(12))
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
              "deletion_time,scheduled_time\n")  # fmt: skip
PODS = POD_HEADER + "".join(f"p{i:02d},1000,1024,1,{(100, 200, 300)[i % 3]},,BE,Running,{i},,\n" for i in range(20))
TINY = ["--expert", "best-fit", "--train-seeds", "0,1", "--val-seeds", "2", "--rate", "1.0", "--epochs", "1",
        "--batch", "8", "--lr", "0.01", "--hidden", "8", "--text-dim", "8", "--head-hidden", "8",
        "--no-frag-features", "--cost-weight", "0", "--transition-weight", "0"]  # fmt: skip


def tiny_inputs(root: Path) -> dict[str, Path | str]:
    """Writes the node and pod lists under ``root``: their paths, a chdb DSN and a models root there."""
    (root / "nodes.csv").write_text(NODES)
    (root / "pods.csv").write_text(PODS)
    return {"dsn": f"chdb://{root / 'chdb'}", "pods": root / "pods.csv", "nodes": root / "nodes.csv",
            "models": root / "models"}  # fmt: skip
