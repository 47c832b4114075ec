"""The openb fill benchmark's method (Weng et al., USENIX ATC 2023; written down in
``../shared/benchmarks/openb-fill.md``), on the scheduling core's own policies.

Pods only arrive, none departs. The arrival sequence is the name-sorted pod list shuffled
with the seed, then inflated with clones drawn (with replacement) from the sorted list
until the arrived GPU demand reaches ``target`` × capacity (their stop test compares the
running total plus the drawn pod's *per-GPU* milli, a quirk kept for the same lengths).
Each pod is placed once by the policy, or dropped; ties go to a seeded random node
priority. After every pod: ``arrived`` (cumulative GPU demand, failures included) and
``allocated`` (milli-GPU held). The value at X % arrived is the mean allocated % over the
events whose arrived % rounds to X (X ± 1 as a fallback).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scheduling.assign import place_one
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.policies.base import Policy
from scheduling.snapshot import ClusterSnapshot
from scheduling.step_result import Placement


def gpu_demand(job: JobRequest) -> int:
    return job.num_gpu * job.per_gpu_milli if job.num_gpu else 0


def unfillable(pods: Sequence[JobRequest], capacity_milli: int) -> str | None:
    """Why a fill cannot run on these pods and this GPU capacity (None: it can)."""
    if capacity_milli <= 0:
        return "the fill benchmark fills GPUs: no node has one"
    if not any(gpu_demand(p) for p in pods):
        return "the fill benchmark fills GPUs: no pod asks for one"
    return None


def fill_sequence(pods: Sequence[JobRequest], capacity_milli: int, seed: int, target: float = 1.3) -> list[JobRequest]:
    """The arrival order for one seed (originals shuffled, then clones until the GPU demand reaches
    ``target`` × the capacity). Pods that ask for no GPU can never get there: refused (ValueError),
    as is a cluster without GPUs (the loop cloned pods for ever)."""
    if (why := unfillable(pods, capacity_milli)) is not None:
        raise ValueError(why)
    rng = np.random.default_rng(seed)
    originals = sorted(pods, key=lambda p: p.job_id)
    order = [originals[i] for i in rng.permutation(len(originals))]
    total = sum(gpu_demand(p) for p in order)
    goal = target * capacity_milli
    n = 0
    while True:
        drawn = originals[int(rng.integers(len(originals)))]
        if total + drawn.per_gpu_milli * (1 if drawn.num_gpu else 0) > goal:
            break
        n += 1
        order.append(replace(drawn, job_id=f"{drawn.job_id}-clone-{n}"))
        total += gpu_demand(drawn)
    return order


@dataclass(frozen=True)
class FillRun:
    policy: str
    seed: int
    capacity_milli: int
    arrived: np.ndarray  # cumulative GPU demand after each pod
    allocated: np.ndarray  # milli-GPU allocated after each pod
    placed: int
    dropped: int

    def allocated_at(self, arrived_pct: int) -> float:
        """Mean allocated % over the events whose arrived % rounds to ``arrived_pct`` (half up, as Go
        rounds), else to one below, else to one above; when none does (tiny clusters), interpolated
        between the events around it (NaN outside the run). Defined once: the fill benchmark and the
        promotion gate read it (found by review: the benchmark said NaN where the gate interpolated)."""
        pct = self.arrived / self.capacity_milli * 100
        alloc = self.allocated / self.capacity_milli * 100
        rounded = np.floor(pct + 0.5)
        for x in (arrived_pct, arrived_pct - 1, arrived_pct + 1):
            hit = rounded == x
            if hit.any():
                return float(alloc[hit].mean())
        if not len(pct) or not pct[0] <= arrived_pct <= pct[-1]:
            return float("nan")
        return float(np.interp(arrived_pct, pct, alloc))


def run_fill(nodes: Sequence[NodeView], sequence: Sequence[JobRequest], policy: Policy, seed: int) -> FillRun:
    """Place ``sequence`` one pod at a time on an empty cluster of ``nodes``."""
    rng = np.random.default_rng(seed + 1_000_003)
    # ties go to the lowest index: a seeded permutation of the nodes is the node priority
    snap = ClusterSnapshot.from_nodes([nodes[i] for i in rng.permutation(len(nodes))])
    capacity = int(snap.gpu_cap_milli.sum())
    arrived = np.empty(len(sequence), dtype=np.int64)
    allocated = np.empty(len(sequence), dtype=np.int64)
    total = held = placed = 0
    for i, pod in enumerate(sequence):
        total += gpu_demand(pod)
        if isinstance(place_one(snap, pod, policy, top_k=0), Placement):
            held += gpu_demand(pod)
            placed += 1
        arrived[i], allocated[i] = total, held
    return FillRun(policy.name, seed, capacity, arrived, allocated, placed, len(sequence) - placed)
