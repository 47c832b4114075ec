"""No step while the input logs are restored after an assignment (streams/log_restore.py,
streams/loop.py), on the real worker app and loop with the broker stood in.

Found by review: Faust may end its table recovery before it sends ``on_rebalance_complete``, where the
restore runs, and its ``completed`` event stays set from the first start, so the loop's clock could
come round during the read-back. The old owner of a partition had placed job j on n1 (its command
sent, its offset committed) and died before the changelog write: this worker's tables had j pending,
its step placed j again, on n2, under the same decision id, and the restore then skipped the old
decision. Two commands, two nodes, one decision id."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduling.events import (
    DecisionRecord,
    JobSubmitted,
    decision_id_for,
    decode,
)
from streams import log_restore
from streams.state import PendingJob, on_decision, on_submitted, places_its_job
from tests.streams.loop_helpers import C1, T0, c1_node, delivered, stood_in_worker

JOB = JobSubmitted(job_id="j", event_id="ev-j", event_time=T0, cluster="c1", cpu_milli=1000, memory_mib=1024)



async def old_owners_decision() -> bytes:
    """The decision the partition's old owner published: j on n1 (the only node it knew)."""
    out: list[bytes] = []

    async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
        if topic.endswith("decisions"):
            out.append(value)
        return await delivered(topic, key, value, partition, headers)

    w, _ = stood_in_worker(publish, policy="best-fit")
    w.nodes.data["n1"] = c1_node("n1")
    w.apply(on_submitted(JOB, None, 0.0), partition=C1)
    await w.loop.tick()  # type: ignore[attr-defined]
    return out[0]


def test_no_step_runs_while_the_logs_are_restored_and_the_old_owners_placement_stands(monkeypatch) -> None:
    async def run() -> None:
        decided = await old_owners_decision()
        old = decode("decisions", decided)
        sent: list[tuple[str, Any]] = []

        async def publish(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
            sent.append((topic.rsplit(".", 1)[-1], decode(topic.split(".", 1)[-1], value)))
            return await delivered(topic, key, value, partition, headers)

        w, assigned = stood_in_worker(publish, policy="best-fit")
        loop = w.loop  # type: ignore[attr-defined]
        w.nodes.data["n1"] = c1_node("n1")
        w.nodes.data["n2"] = c1_node("n2", 1500)  # best-fit would take the tighter n2
        w.apply(on_submitted(JOB, None, 0.0), partition=C1)  # the changelog lost running[j]: pending here
        # a later rebalance, the partition new to this worker: Faust's signal to every handler (the catch-up
        # gates, the loop, the log restore); recovery.completed is set already, and in_recovery is False
        await w.app.on_partitions_assigned.send(assigned)
        assert not w.app.in_recovery and w.app.tables.recovery.completed.is_set()
        await loop.tick()  # before on_rebalance_complete: the restore is due, no step

        async def slow_read_back(settings: Any, group: str, partitions: Any) -> dict[str, list]:
            await asyncio.sleep(0.5)  # a consumer of its own, up to 30,000 messages
            return {"jobs.submitted": [(C1, 0, JOB.to_bytes(), None)], "decisions": [(C1, 0, decided, None)],
                    "jobs.lifecycle": []}  # fmt: skip

        monkeypatch.setattr(log_restore, "read_back", slow_read_back)
        restoring = asyncio.ensure_future(w.app.on_rebalance_complete.send())  # where the restore runs
        await asyncio.sleep(0.1)
        await loop.tick()  # the loop's clock comes round during the read-back: it must not step
        await restoring
        assert w.restore_due is None and w.restoring == 0
        await loop.tick()  # after it: j is the old owner's, nothing to decide; its command is sent again, the
        # old owner may have died before it sent it (streams/uncommanded.py): the same decision, on n1
        sent_now = [ev for topic, ev in sent if topic in ("decisions", "actions")]
        assert [(e.kind, e.decision_id, e.node_id) for e in sent_now] == [("place", old.decision_id, "n1")]
        held = w.running["j"]
        assert (held["node_id"], held["decision_id"]) == ("n1", old.decision_id)

    asyncio.run(run())


def test_a_decision_whose_id_holds_another_placement_is_stale() -> None:
    """The same decision id, placed on another node (by another owner of the partition): its command would
    start a second run, so it is stale (streams.state.on_decision; places_its_job then sends nothing)."""
    pending = PendingJob(job=JOB, submit_ts=0.0, queued_ts=0.0)
    did = decision_id_for("j", 0, "ev-j")
    rec = DecisionRecord(event_id=did, decision_id=did, event_time=T0, job_id="j", cluster="c1", outcome="placed",
                         node_id="n1", gpu_indices=[], policy="best-fit", latency_ms=1.0, step_id="s")  # fmt: skip
    placed = on_decision(rec, pending)
    running = placed.running["j"]
    assert places_its_job(placed, rec) and places_its_job(on_decision(rec, None, running), rec)
    elsewhere = rec.model_copy(update={"node_id": "n2"})
    t = on_decision(elsewhere, None, running)
    assert not places_its_job(t, elsewhere) and "holds the placement on n1" in t.note


def test_a_newer_assignment_keeps_the_restore_due_until_its_own_partitions_are_restored(monkeypatch) -> None:
    """Found by the second diff review: the restore that finished cleared the gate although a newer
    assignment had brought partitions it did not restore, and the loop could step on them."""
    from faust.types import TP

    from streams.log_restore import restore_due

    async def run() -> None:
        w, _ = stood_in_worker(policy="best-fit")
        topics = [w.settings.topic(t) for t in ("jobs.submitted", "decisions", "jobs.lifecycle")]
        holding = {"now": {TP(t, 0) for t in topics}}
        w.app.consumer.assignment = lambda: holding["now"]  # type: ignore[method-assign]
        await w.app.on_partitions_assigned.send(holding["now"])
        assert restore_due(w)
        newer = {TP(t, p) for t in topics for p in (0, 1)}

        async def read_back(settings: Any, group: str, partitions: Any) -> dict[str, list]:
            holding["now"] = newer  # a rebalance gives partition 1 while partition 0 is read back
            await w.app.on_partitions_assigned.send(newer)
            return {"jobs.submitted": [], "decisions": [], "jobs.lifecycle": []}

        monkeypatch.setattr(log_restore, "read_back", read_back)
        await w.app.on_rebalance_complete.send()  # restores partition 0 only
        assert restore_due(w)  # partition 1 waits for its own restore
        await w.app.on_rebalance_complete.send()
        assert not restore_due(w)

    asyncio.run(run())
