"""A step's decision that is stale by the time the broker acknowledged it sends no command
(streams/step_publication.py, streams/state.py ``places_its_job``), on the real worker app and
loop with the broker stood in.

Found by review: a job re-queued for its second attempt (its node went silent) whose first
attempt's ``finished`` arrives while the step that decided the second awaits the broker (or the
model: Triton's deadline is the widest such window). The report is applied first, the job is done,
and the second attempt's decision is stale when applied; its placement command still went out, so
the finished job ran again on another node, with nothing accounting for its resources."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from scheduling.events import (
    JobLifecycle,
    JobSubmitted,
    decision_id_for,
    decode,
)
from streams.agents import apply_lifecycle
from streams.state import DoneJob, PendingJob, RunningJob, Transition
from tests.streams.loop_helpers import C1, T0, c1_node, delivered, stood_in_worker


def requeued(job_id: str) -> PendingJob:
    """A job whose first attempt (on node "lost") was given up on: pending again, at attempt 1."""
    ev = JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                      memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip
    return PendingJob(job=ev, attempt=1, failures=1, submit_ts=T0.timestamp(), queued_ts=T0.timestamp())


def test_a_decision_stale_once_acknowledged_sends_no_command_and_the_job_stays_done() -> None:
    commands: list[Any] = []
    decisions: list[Any] = []
    worker: dict[str, Any] = {}

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("decisions"):
            rec = decode("decisions", value)
            decisions.append(rec)
            if rec.job_id == "late" and rec.outcome == "placed":  # while the broker has it: attempt 0 finished
                finished = JobLifecycle(job_id="late", cluster="c1", state="finished", attempt=0, exit_code=0,
                                        node_id="lost", decision_id=decision_id_for("late", 0, "ev-late"),
                                        event_time=T0 + timedelta(seconds=5))  # fmt: skip
                await apply_lifecycle(worker["w"], finished, C1)
        elif topic.endswith("actions"):
            commands.append(decode("actions", value))
        return await delivered(topic, key, value, partition, headers)

    async def run() -> None:
        w, _ = stood_in_worker(publish, policy="best-fit")
        worker["w"] = w
        w.nodes.data["n1"] = c1_node("n1", num_gpu=2)
        w.apply(Transition(pending={"late": requeued("late"), "other": requeued("other")}), partition=C1)
        await w.loop.tick()  # type: ignore[attr-defined]
        placed = sorted(d.job_id for d in decisions if d.outcome == "placed")
        assert placed == ["late", "other"]  # both decided in the step
        assert [c.job_id for c in commands] == ["other"]  # the stale one sent nothing
        assert w.read("done", "late", DoneJob).status == "finished" and w.read("running", "late", RunningJob) is None
        assert list(w.running) == ["other"] and not list(w.pending) and w.inflight == {}
        await w.loop.tick()  # type: ignore[attr-defined]
        assert [c.job_id for c in commands] == ["other"]  # and nothing later either

    asyncio.run(run())
