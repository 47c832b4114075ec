"""A ``started`` report that says which GPUs a job holds is checked before it is taken (``streams/state.py``
``gpu_indices_problem``). Found by review: a ``started`` that overtook its decision (after a restart) and
named no ``gpu_indices`` was adopted as it was; the ledger could not account a holding of no GPUs for a
two-GPU job and dropped all of it, CPU too, and the next step placed another job on the same GPUs."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, decision_id_for, decode
from streams.agents import apply_held, apply_lifecycle
from streams.early_reports import EarlyReport
from streams.state import PendingJob, RunningJob, gpu_indices_problem, on_lifecycle, on_submitted
from tests.streams.loop_helpers import C1, T0, c1_node, delivered, stood_in_worker


def submitted(job_id: str, num_gpu: int = 2) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=6000,
                        memory_mib=8192, num_gpu=num_gpu, gpu_milli=1000)  # fmt: skip


def started(job_id: str, gpus: list[int], node: str = "n1") -> JobLifecycle:
    return JobLifecycle(job_id=job_id, cluster="c1", state="started", attempt=0, node_id=node, gpu_indices=gpus,
                        decision_id=decision_id_for(job_id, 0, f"ev-{job_id}"), event_time=T0 + timedelta(seconds=1))  # fmt: skip


@pytest.mark.parametrize(("gpus", "node_gpus", "why"), [
    ([], 2, "name 0 GPU(s), the job asks for 2"),
    ([0], 2, "name 1 GPU(s), the job asks for 2"),
    ([1, 1], 2, "name a GPU twice"),
    ([1, 2], 2, "a GPU the node does not have (it has 2)"),
    ([0, 1], 2, None),
    ([3, 7], None, None),  # the node not known here: the count alone
])  # fmt: skip
def test_the_gpus_a_report_names_must_be_the_jobs(gpus: list[int], node_gpus: int | None, why: str | None) -> None:
    problem = gpu_indices_problem(gpus, 2, node_gpus)
    assert problem is None if why is None else why in (problem or "")


def test_a_started_from_another_node_must_name_the_gpus_it_holds_there() -> None:
    """The agent says where a reserved job really runs (the worker re-decided the attempt elsewhere)."""
    job = submitted("a")
    held = RunningJob(job=job, attempt=0, submit_ts=0.0, decision_id=decision_id_for("a", 0, "ev-a"), node_id="n1",
                      gpu_indices=[0, 1], reserved_ts=0.0)  # fmt: skip
    moved = on_lifecycle(started("a", [], node="n2"), held, max_retries=3, now=0.0, node_gpus=4)
    assert moved.deadletter and "asks for 2" in moved.deadletter and not moved.running
    same_node = on_lifecycle(started("a", []), held, max_retries=3, now=0.0, node_gpus=2)  # keeps its reserved GPUs
    assert same_node.deadletter is None and same_node.running["a"].gpu_indices == [0, 1]  # type: ignore[union-attr]
    cpu_job = on_lifecycle(started("c", []), None, max_retries=3, now=0.0, node_gpus=2,
                           pending=PendingJob(job=submitted("c", num_gpu=0), submit_ts=0.0, queued_ts=0.0))  # fmt: skip
    assert cpu_job.deadletter is None and cpu_job.running["c"].state == "running"  # type: ignore[union-attr]


def test_a_started_without_its_gpus_is_dead_lettered_and_the_decision_still_places_the_job() -> None:
    placed: list[Any] = []
    dead: list[tuple[bytes, str]] = []

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("actions"):
            placed.append(decode("actions", value))
        return await delivered(topic, key, value, partition, headers)

    async def go() -> tuple[str | None, dict[str, Any], dict[str, Any]]:
        w, _ = stood_in_worker(publish, policy="best-fit")

        async def deadletter(raw: bytes, reason: str, *_: Any, **__: Any) -> None:
            dead.append((raw, reason))

        w.deadletter = deadletter  # type: ignore[method-assign]
        w.nodes.data["n1"] = c1_node("n1", num_gpu=2)  # 8 cores, 2 GPUs
        w.apply(on_submitted(submitted("a"), None, time.time()), partition=C1)
        # a's started (its placement made before a restart) comes before its decision, and names no GPU
        refused = await apply_lifecycle(w, started("a", []), C1)
        after_report = {"pending": sorted(w.pending), "running": sorted(w.running)}
        early = started("a", [5, 6])  # the same through the held reports' path: dead-lettered by it
        await apply_held(w, EarlyReport(event=early, partition=C1, since=0.0, raw=b"raw-early"))
        rec = DecisionRecord(decision_id=early.decision_id, event_id=early.decision_id, job_id="a", cluster="c1",
                             outcome="placed", node_id="n1", gpu_indices=[0, 1], policy="best-fit", latency_ms=0.0,
                             cpu_milli=6000, memory_mib=8192, gpu_milli_per_gpu=1000)  # fmt: skip
        await w.apply_decision(rec, C1, in_stream=False)  # the decision comes back: it places a
        w.apply(on_submitted(submitted("b"), None, time.time()), partition=C1)
        await w.loop.tick()  # type: ignore[attr-defined]
        running = {k: (d["node_id"], d["gpu_indices"]) for k, d in w.running.items()}
        return refused, after_report, running

    refused, after_report, running = asyncio.run(go())
    assert refused is not None and "name 0 GPU(s), the job asks for 2" in refused
    assert after_report == {"pending": ["a"], "running": []}  # nothing taken from the report
    assert [(raw, "does not have" in why) for raw, why in dead] == [(b"raw-early", True)]
    assert running == {"a": ("n1", [0, 1])}  # b waits: n1's GPUs are a's
    assert [(c.job_id, c.gpu_indices) for c in placed] == [("a", [0, 1])]  # (a's again: its agent knows the id)
