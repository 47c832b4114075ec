"""Two workers in one consumer group share the clusters by partition: each schedules only
the clusters it owns, every job is placed exactly once, and all of them finish."""

from __future__ import annotations

import asyncio

import pytest

from ops.local_stack import free_port, worker_status
from scheduling.events import JobSubmitted, NodeTelemetry, partition_for
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish

pytestmark = pytest.mark.integration

PER_CLUSTER = 15


def test_two_workers_split_the_clusters_and_place_each_job_once(make_stack) -> None:  # type: ignore[no-untyped-def]
    p = make_stack()
    # clusters on all four partitions, so both workers own some
    clusters = []
    for i in range(40):
        c = f"c{i}"
        if partition_for(c, 4) not in {partition_for(x, 4) for x in clusters}:
            clusters.append(c)
    assert len(clusters) == 4
    asyncio.run(ensure_topics(p.settings))
    p.start_worker()
    second = p.settings.model_copy(update={"web_port": free_port(), "state_dir": p.run_dir / "second"})
    p.start_worker("--no-archive", name="worker2", settings=second)
    p.start_agents(*FAST_AGENTS)

    inventory = [NodeTelemetry(node_id=f"{c}-n{n}", cluster=c, source="inventory", cpu_milli=16000,
                               memory_mib=65536, num_gpu=2, gpu_model="T4") for c in clusters for n in range(2)]
    jobs = [JobSubmitted(job_id=f"{c}-j{j}", cluster=c, cpu_milli=2000, memory_mib=1024, num_gpu=1, gpu_milli=500,
                         trace_duration_s=1) for c in clusters for j in range(PER_CLUSTER)]  # fmt: skip
    total = PER_CLUSTER * len(clusters)

    def both() -> tuple[dict, dict]:  # type: ignore[type-arg]
        a, b = worker_status(p.settings, 5), worker_status(second, 5)
        assert a is not None and b is not None
        return a, b

    def answered() -> tuple[dict, dict] | None:  # type: ignore[type-arg]
        """Both statuses, or None when a worker busy for over 5 s (a rebalance, a loaded CI machine) did not
        answer: the waits below ask again rather than fail (found by the flakiness review)."""
        a, b = worker_status(p.settings, 5), worker_status(second, 5)
        return None if a is None or b is None else (a, b)

    def split(_: dict) -> bool:  # type: ignore[type-arg]
        if (st := answered()) is None:
            return False
        a, b = (set(s["owned_partitions"]) for s in st)
        return bool(a) and bool(b) and not a & b and a | b == {0, 1, 2, 3}

    # the group rebalanced: the partitions are split between the two, none owned twice
    p.wait(split, timeout=90, what="the two workers to share the partitions")
    publish(p.settings, [*inventory, *jobs])

    p.wait(lambda _: (st := answered()) is not None and sum(s["finished"] for s in st) == total, timeout=180,
           what="all jobs, on two workers")
    a, b = both()
    # each worker placed only the jobs of the clusters it owns, and both had work
    assert a["loop"]["placed"] > 0 and b["loop"]["placed"] > 0
    assert a["loop"]["placed"] + b["loop"]["placed"] == total
    # the archive (the first worker archives every topic) agrees: one decision per job, none twice.
    # Its archiver consumes the second worker's decisions from Kafka: wait until it has caught up
    # (on a loaded machine it lagged by 15 decisions when both workers already reported "finished")
    placed = "SELECT count() FROM decisions_applied WHERE outcome = 'placed'"
    finished = "SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'"
    # a failure says which count fell short and what each worker reported. (One 60 s timeout in CI,
    # with the archiver's lag at 0: these polls' /sql?flush=1 raced the archiver's consumer loop, which
    # dropped the rows it read during the flush's write and committed their offsets; fixed, and
    # tests/streams/test_archiver.py's flush-beside test holds it.)
    got = (p.wait_scalar(placed, total, 90), p.wait_scalar(finished, total, 90))
    assert got == (total, total), (f"archive: {got[0]} placed decisions and {got[1]} finished jobs of {total}; "
                                   f"workers: {[(s['loop']['placed'], s['finished'], s.get('archiver')) for s in both()]}")
    assert p.sql("SELECT job_id FROM jobs_lifecycle WHERE state = 'started' GROUP BY job_id "
                 "HAVING uniqExact(decision_id) > 1") == []  # fmt: skip
