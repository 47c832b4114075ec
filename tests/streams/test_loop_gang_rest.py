"""A gang whose member finished is completed by the rest (``streams/dag_gate.py``), on the
real worker loop with the broker stood in. Found by review: member B finished, member A then
failed and went back to the queue, and the gang waited for ever for a member that can never be
pending again ("waiting for 1 more member"). As Volcano counts succeeded pods toward a gang's
minimum, the members that finished count toward the gang: A runs on its own."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from scheduling.events import JobLifecycle, JobSubmitted, NodeTelemetry, partition_for
from streams.agents import lifecycle_transition
from streams.state import on_submitted
from tests.streams.loop_helpers import stood_in_worker

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def member(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, num_gpu=1, gpu_milli=1000, gang_id="g", gang_size=2)  # fmt: skip


def test_a_member_that_fails_after_another_finished_runs_with_the_rest_of_its_gang() -> None:
    async def go() -> tuple[str, str]:
        w, _ = stood_in_worker(policy="best-fit", max_retries=3)
        loop = w.loop  # type: ignore[attr-defined]
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=8000,
                                           memory_mib=16384, num_gpu=2, gpu_model="A100").model_dump(mode="json")  # fmt: skip
        for name in ("a", "b"):
            w.apply(on_submitted(member(name), None, 0.0), partition=part)
        await loop.tick()
        assert sorted(w.running) == ["a", "b"]  # the gang, whole

        def report(job_id: str, state: str) -> None:
            r = w.running[job_id]
            ev = JobLifecycle(job_id=job_id, cluster="c1", state=state, attempt=r["attempt"],
                              decision_id=r["decision_id"], node_id=r["node_id"])  # fmt: skip
            w.apply(lifecycle_transition(w, ev), partition=part)

        for name in ("a", "b"):
            report(name, "started")
        report("b", "finished")
        report("a", "failed")  # back to the queue, attempt 1
        assert "a" in w.pending and w.done["b"]["status"] == "finished"
        await loop.tick()
        return w.running["a"]["state"], loop.last_reason.get("a", "")

    state, why = asyncio.run(go())
    assert state == "reserved", why  # placed again, with the rest of its gang (itself)


def test_another_clusters_gang_of_the_same_name_neither_completes_nor_takes_down_this_one() -> None:
    """Cluster c1's gang "g" had a member finish and one rejected; cluster c2's gang "g" (two members, one
    GPU each, one GPU in the cluster) must wait whole, not run its members one by one as if the other
    cluster's finished member were its own, nor be rejected for the other's (found by review: the gang
    bookkeeping was keyed by gang id alone). Records of done gang members from before the key held a
    cluster still count toward their gang id everywhere."""
    from streams.state import DoneJob

    async def go() -> tuple[list[str], list[str], dict[str, str]]:
        w, _ = stood_in_worker(policy="best-fit", max_retries=3)
        loop = w.loop  # type: ignore[attr-defined]
        for i, status in enumerate(("finished", "rejected")):
            done = DoneJob(job_id=f"c1-{i}", event_id=f"ev-c1-{i}", status=status, attempt=0, gang_id="g",
                           cluster="c1")  # fmt: skip
            w.note_gang_member(done.model_dump(mode="json"))
        c2 = next(f"c{i}" for i in range(2, 50) if partition_for(f"c{i}", 4) != partition_for("c1", 4))
        w.nodes.data["m1"] = NodeTelemetry(node_id="m1", cluster=c2, event_time=T0, cpu_milli=8000,
                                           memory_mib=16384, num_gpu=1, gpu_model="A100").model_dump(mode="json")  # fmt: skip
        for name in ("x", "y"):
            job = member(name).model_copy(update={"cluster": c2})
            w.apply(on_submitted(job, None, 0.0), partition=partition_for(c2, 4))
        await loop.tick()
        running, pending = sorted(w.running), sorted(w.pending)
        old = DoneJob(job_id="old", event_id="ev-old", status="finished", attempt=0, gang_id="h")  # no cluster
        w.note_gang_member(old.model_dump(mode="json"))
        return running, pending, {"h": str(w.gang_state(c2, "h", 0.0)), "g": str(w.gang_state(c2, "g", 0.0))}

    running, pending, states = asyncio.run(go())
    assert running == [] and pending == ["x", "y"]  # the gang waits whole (one GPU for two members)
    assert states == {"h": "(False, 1)", "g": "(False, 0)"}


def test_a_gang_id_used_again_after_its_gang_was_over_names_a_new_gang() -> None:
    """Found by review: yesterday's gang "g" (two members finished, one rejected) was counted toward today's
    gang "g" of four, which was then rejected ("4 members pending but gang_size is 2", or "another member
    was rejected"), or, no larger than the old count, placed member by member. Members done before a job's
    submission are another gang's."""
    import time

    from streams.state import DoneJob, Transition

    async def go() -> tuple[list[str], dict[str, str]]:
        w, _ = stood_in_worker(policy="best-fit", max_retries=3)
        part = partition_for("c1", 4)
        w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=64000,
                                           memory_mib=65536, num_gpu=4, gpu_model="A100").model_dump(mode="json")  # fmt: skip
        yesterday = time.time() - 86_400
        w.apply(Transition(done={f"old{i}": DoneJob(job_id=f"old{i}", event_id=f"ev-old{i}", status=status, attempt=0,
                                                    gang_id="g", cluster="c1", done_ts=yesterday)
                                 for i, status in enumerate(("finished", "finished", "rejected"))}), partition=part)  # fmt: skip
        now = datetime.fromtimestamp(time.time(), UTC)
        for i in range(4):
            job = member(f"new{i}").model_copy(update={"event_time": now, "gang_size": 4})
            w.apply(on_submitted(job, None, time.time()), partition=part)
        await w.loop.tick()  # type: ignore[attr-defined]
        return sorted(w.running), {k: d["status"] for k, d in w.done.items() if k.startswith("new")}

    running, done = asyncio.run(go())
    assert done == {} and running == ["new0", "new1", "new2", "new3"]  # the new gang, placed whole


def test_a_members_failure_that_overtakes_its_decision_fences_the_rest_of_its_gang() -> None:
    """Found by review: after a restart the lifecycle backlog can be applied before the decisions'. A member's
    ``failed`` then stands for its decision (adopted from ``pending``), and the running member of its gang
    was not fenced: it ran on alone, its gang waiting "1/2 pending" behind it."""
    from datetime import timedelta

    from scheduling.events import decision_id_for
    from streams.state import PendingJob, RunningJob, Transition

    def running(job_id: str, node: str) -> RunningJob:
        return RunningJob(job=member(job_id), attempt=0, submit_ts=T0.timestamp(), node_id=node, gpu_indices=[0],
                          decision_id=decision_id_for(job_id, 0, f"ev-{job_id}"), reserved_ts=T0.timestamp(),
                          state="running")  # fmt: skip

    async def go() -> dict[str, list[str]]:
        fences = {}
        for a_is in ("running", "pending"):
            w, _ = stood_in_worker(policy="best-fit")
            t = Transition(running={"b": running("b", "n2")})
            if a_is == "running":
                t.running["a"] = running("a", "n1")
            else:
                t.pending["a"] = PendingJob(job=member("a"), submit_ts=T0.timestamp(), queued_ts=T0.timestamp())
            w.apply(t, partition=partition_for("c1", 4))
            failed = JobLifecycle(job_id="a", cluster="c1", state="failed", attempt=0, exit_code=1, node_id="n1",
                                  decision_id=decision_id_for("a", 0, "ev-a"), event_time=T0 + timedelta(seconds=9))  # fmt: skip
            fences[a_is] = [c.job_id for c in lifecycle_transition(w, failed).commands]
        return fences

    assert asyncio.run(go()) == {"running": ["b"], "pending": ["b"]}
