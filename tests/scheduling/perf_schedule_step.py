"""Timing sanity check (not a test): one schedule_step over the openb trace.

Run: ``.venv/bin/python tests/scheduling/perf_schedule_step.py [pending=256]``
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from pathlib import Path

from scheduling.assign import schedule_step
from scheduling.job import JobRequest
from scheduling.policies import available_policies, get_policy
from scheduling.snapshot import ClusterSnapshot, NodeView

TRACE = Path("/work/shared/data/traces/alibaba-gpu-2023")


def load_nodes() -> list[NodeView]:
    with open(TRACE / "openb_node_list_gpu_node.csv") as f:
        return [NodeView(node_id=r["sn"], cpu_milli=int(r["cpu_milli"]), memory_mib=int(r["memory_mib"]),
                         num_gpu=int(r["gpu"]), gpu_model=r["model"] or None) for r in csv.DictReader(f)]  # fmt: skip


def load_jobs(limit: int) -> list[JobRequest]:
    jobs = []
    with open(TRACE / "openb_pod_list_default.csv") as f:
        for r in csv.DictReader(f):
            models = frozenset(m for m in r["gpu_spec"].split("|") if m)
            jobs.append(JobRequest(job_id=r["name"], cpu_milli=int(r["cpu_milli"]), memory_mib=int(r["memory_mib"]),
                                   num_gpu=int(r["num_gpu"]), per_gpu_milli=int(r["gpu_milli"]), gpu_models=models,
                                   qos=r["qos"], submit_time=float(r["creation_time"])))  # fmt: skip
            if len(jobs) >= limit:
                break
    return jobs


def main() -> None:
    pending = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    snap = ClusterSnapshot.from_nodes(load_nodes())
    jobs = load_jobs(pending)
    for name in available_policies():
        policy = get_policy(name)
        times, wall = [], []
        for _ in range(7):
            t = time.perf_counter()
            res = schedule_step(snap, jobs, policy, now=0.0)
            wall.append((time.perf_counter() - t) * 1000)
            times.append(res.compute_ms)
        print(f"{name:16s} nodes={snap.num_nodes} pending={len(jobs)} placed={len(res.placements)} "
              f"unschedulable={len(res.unschedulable)} compute_ms median={statistics.median(times):.1f} "
              f"min={min(times):.1f} (wall {statistics.median(wall):.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
