"""A loose performance guard: one step over a cluster of the openb size must stay far
below a second (it takes ~20 ms); a per-node Python loop in the hot path would not."""

import time

import numpy as np
from sched_builders import job, node, snap

from scheduling.assign import schedule_step
from scheduling.policies import get_policy


def test_step_over_1213_nodes_and_256_jobs_is_fast():
    rng = np.random.default_rng(7)
    models = ["T4", "P100", "V100M16", "V100M32", "A10", "G2"]
    nodes = [node(f"n{i}", cpu=int(rng.choice([32, 64, 96])) * 1000, mem=262_144,
                  gpus=int(rng.choice([1, 2, 4, 8])), model=models[i % len(models)]) for i in range(1213)]  # fmt: skip
    s = snap(*nodes)
    shares = [1000, 1000, 500, 250, 810]
    jobs = [job(f"j{i}", cpu=int(rng.integers(1, 16)) * 1000, mem=int(rng.integers(1, 64)) * 1024,
                gpus=int(rng.choice([0, 1, 1, 2, 4])), share=shares[i % len(shares)], submit_time=float(i))
            for i in range(256)]  # fmt: skip
    jobs = [j if j.num_gpu <= 1 else job(j.job_id, cpu=j.cpu_milli, mem=j.memory_mib, gpus=j.num_gpu) for j in jobs]
    for name in ("fifo-first-fit", "best-fit"):
        policy = get_policy(name)
        schedule_step(s, jobs, policy, now=0)  # warm caches
        t = time.perf_counter()
        result = schedule_step(s, jobs, policy, now=0)
        elapsed = time.perf_counter() - t
        assert len(result.placements) == 256
        assert elapsed < 0.5, f"{name}: {elapsed * 1000:.0f} ms for 256 jobs x 1213 nodes"
