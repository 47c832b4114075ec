"""The scheduling loop's kept cluster snapshot (streams/snapshot_cache.py): equal, step after
step, to one built afresh from the nodes and the running table; rebuilt when nodes change;
and a write the ledger missed is caught by the verification and repaired."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot
from streams.held_ledger import HeldLedger, Holding
from streams.snapshot_cache import SnapshotCache


class Cluster:
    """Nodes and a running table as the worker keeps them (every write told to the ledger)."""

    def __init__(self, n: int, verify_s: float = 3600.0) -> None:
        self.views = [NodeView(f"n{i}", cluster="a", cpu_milli=64_000, memory_mib=262_144, num_gpu=(0, 2, 8)[i % 3],
                               gpu_model=(None, "T4", "A10")[i % 3]) for i in range(n)]  # fmt: skip
        self.running: dict[str, Holding] = {}
        self.rows: dict[str, dict[str, Any]] = {}  # the table's rows (what the ledger reads identities from)
        self.ledger = HeldLedger()
        self.cache = SnapshotCache(self.ledger, verify_s=verify_s)

    def write(self, job_id: str, holding: Holding | None, *, tell: bool = True) -> None:
        if holding is None:
            self.running.pop(job_id, None)
            self.rows.pop(job_id, None)
        else:
            self.running[job_id] = holding
            self.rows[job_id] = {"decision_id": f"d{len(self.rows)}-{job_id}", "node_id": holding[0],
                                 "gpu_indices": holding[2], "job": {"cluster": "a"}}  # fmt: skip
        if tell:
            self.ledger.touch(job_id)

    def snapshot(self) -> ClusterSnapshot:
        self.ledger.sync(self.rows, self.running.get)
        return self.cache.snapshot("a", self.views, lambda: list(self.running.values()))

    def rebuilt(self) -> ClusterSnapshot:
        snap = ClusterSnapshot.from_nodes(self.views)
        snap.reserve_many([(snap.table.index[n], req, gpus) for n, req, gpus in self.running.values()])
        return snap


def place(c: Cluster, rng: random.Random, job_id: str) -> None:
    i = rng.randrange(len(c.views))
    node = c.views[i]
    gpus = sorted(rng.sample(range(node.num_gpu), rng.randint(0, min(2, node.num_gpu))))
    cpu, mem = rng.choice([500, 4000]), rng.choice([512, 8192])
    share = rng.choice([250, 1000]) if gpus else 0  # (a share of several GPUs is refused: whole GPUs then)
    req = JobRequest(job_id, cluster="a", cpu_milli=cpu, memory_mib=mem, num_gpu=len(gpus),
                     per_gpu_milli=share if len(gpus) < 2 else 1000, app=rng.choice([None, "web", "db"]))  # fmt: skip
    c.write(job_id, (node.node_id, req, gpus))


def test_the_kept_snapshot_equals_a_rebuild_over_placements_finishes_and_health_flips() -> None:
    rng = random.Random(7)
    c = Cluster(40)
    for step in range(200):
        for k in range(rng.randint(0, 6)):
            place(c, rng, f"s{step}-{k}")
        for job_id in rng.sample(sorted(c.running), min(len(c.running), rng.randint(0, 5))):
            c.write(job_id, None)
        if rng.random() < 0.3:  # a telemetry report that changes only the health
            i = rng.randrange(len(c.views))
            c.views[i] = replace(c.views[i], healthy=not c.views[i].healthy)
        if rng.random() < 0.3:  # a new report with the same facts (a new view object)
            i = rng.randrange(len(c.views))
            c.views[i] = replace(c.views[i])
        snap = c.snapshot()
        assert snap.first_difference(c.rebuilt()) is None, f"step {step}"
        snap.reserve(0, JobRequest("scratch", cluster="a", cpu_milli=1))  # a step's copy: the kept one stays
    assert c.cache.builds == 1 and c.cache.mismatches == 0  # built once, then followed
    assert c.snapshot().first_difference(c.rebuilt()) is None


def test_a_node_that_joins_or_changes_capacity_builds_it_afresh_on_the_same_table_when_it_can() -> None:
    c = Cluster(6)
    first = c.snapshot()
    c.views.append(NodeView("n6", cluster="a", cpu_milli=1000, memory_mib=1024))
    place(c, random.Random(1), "j")
    joined = c.snapshot()
    assert c.cache.builds == 2 and joined.table is not first.table and joined.first_difference(c.rebuilt()) is None
    c.views[2] = replace(c.views[2], cpu_milli=128_000)
    assert c.snapshot().first_difference(c.rebuilt()) is None and c.cache.builds == 3
    assert c.cache.tables["a"] is c.snapshot().table  # what the policy's warm-up builds on


def test_a_write_the_ledger_missed_is_caught_by_the_verification_and_repaired() -> None:
    c = Cluster(6, verify_s=0.0)
    c.snapshot()
    job: Any = JobRequest("ghost", cluster="a", cpu_milli=3000)
    c.write("ghost", ("n1", job, []), tell=False)  # e.g. a changelog write outside Worker.apply
    snap = c.snapshot()
    assert c.cache.mismatches == 1
    assert snap.first_difference(c.rebuilt()) is None  # the step got the rebuilt one
    assert c.snapshot().first_difference(c.rebuilt()) is None and c.cache.mismatches == 1  # and the ledger read it all
    assert set(c.ledger.held("a")) == {"ghost"}


def test_without_verification_a_missed_write_would_go_unseen() -> None:
    """The guard above is what catches it (this is why the integration tests verify every step)."""
    c = Cluster(6)
    c.snapshot()
    c.write("ghost", ("n1", JobRequest("ghost", cluster="a", cpu_milli=3000), []), tell=False)
    assert c.snapshot().first_difference(c.rebuilt()) is not None
