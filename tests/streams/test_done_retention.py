"""Done jobs are forgotten SEMSCHED_DONE_RETENTION after they end (``streams/done_retention.py``), on the
real worker loop with the broker stood in: deleted with a tombstone on their cluster's changelog
partition once the partition's forgotten watermark covers them, but not while a job still to run needs
them, nor in a partition this worker does not own; and a submission sent before the watermark is not
restored from the input logs (it may be a forgotten job's; the live agent's refusal is in
test_faust_agents)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from scheduling.events import JobSubmitted, partition_for
from streams.state import DoneJob, Transition, on_submitted
from tests.streams.loop_helpers import C1, T0, stood_in_worker

DAY = 86400.0


def done(job_id: str, *, age_s: float, cluster: str = "c1", status: str = "finished", **kw: Any) -> DoneJob:
    return DoneJob(job_id=job_id, event_id=f"ev-{job_id}", status=status, attempt=0, cluster=cluster,  # type: ignore[arg-type]
                   done_ts=time.time() - age_s, **kw)  # fmt: skip


def submitted(job_id: str, **kw: Any) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=1000,
                        memory_mib=1024, **kw)  # fmt: skip


def worker(**settings: Any) -> tuple[Any, list[tuple[str, int, str, Any]]]:
    """A stood-in worker (no node: nothing is placed) and the changelog writes of its done and forgotten tables."""
    settings.setdefault("done_retention_s", DAY)
    w, _ = stood_in_worker(policy="best-fit", **settings)
    sent: list[tuple[str, int, str, Any]] = []
    for name in ("done", "forgotten"):
        getattr(w, name).send_changelog = (lambda partition, key, value, _n=name, **kw:
                                           sent.append((_n, partition, key, value)))  # fmt: skip
    return w, sent


def test_a_job_done_longer_ago_than_the_retention_is_forgotten_after_its_watermark() -> None:
    async def go() -> tuple[Any, list[tuple[str, int, str, Any]], float]:
        w, sent = worker()
        # "new" ended longer ago than the retention, but not by SEMSCHED_MAX_CLOCK_SKEW more (the margin for
        # producers' clocks ahead)
        old = done("old", age_s=DAY + 400)
        w.apply(Transition(done={"old": old, "new": done("new", age_s=DAY + 200)}), partition=C1)
        sent.clear()
        await w.loop.tick()
        return w, sent, old.done_ts

    w, sent, ended = asyncio.run(go())
    assert "old" not in w.done and "new" in w.done
    mark = ended + w.settings.max_clock_skew_s  # a submission sent up to then may be of a job forgotten
    assert sent == [("forgotten", C1, str(C1), mark), ("done", C1, "old", None)]  # the watermark first
    assert w.forgotten[str(C1)] == mark
    assert w.counters.done_forgotten == 1


def test_nothing_is_forgotten_while_the_broker_does_not_take_the_watermark() -> None:
    """Nor at the next pass (found by review: the watermark raised in memory at the first made the second
    take it for sent, and delete)."""

    async def go() -> list[bool]:
        w, sent = worker()
        w.apply(Transition(done={"old": done("old", age_s=2 * DAY)}), partition=C1)

        def refused(partition: int, key: str, value: Any, **kw: Any) -> asyncio.Future[None]:
            f: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            f.set_exception(RuntimeError("KafkaTimeoutError"))
            return f

        w.forgotten.send_changelog = refused
        kept = []
        for _ in range(2):
            w.loop.retention._next = -1e18
            await w.loop.tick()
            kept.append("old" in w.done)
        w.forgotten.send_changelog = lambda *a, **k: None  # the broker back
        w.loop.retention._next = -1e18
        await w.loop.tick()
        return [*kept, "old" in w.done]

    assert asyncio.run(go()) == [True, True, False]


def test_a_dag_child_accepted_while_the_watermark_was_on_its_way_keeps_its_parent() -> None:
    async def go() -> tuple[bool, bool]:
        w, _ = worker()
        w.apply(Transition(done={"parent": done("parent", age_s=2 * DAY)}), partition=C1)

        def acknowledged_after_the_child_came(partition: int, key: str, value: Any, **kw: Any) -> asyncio.Future[None]:
            f: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def child_then_ack() -> None:
                w.apply(on_submitted(submitted("child", dag_parents=["parent"]), None, 0.0), partition=C1)
                f.set_result(None)

            asyncio.get_running_loop().call_soon(child_then_ack)
            return f

        w.forgotten.send_changelog = acknowledged_after_the_child_came
        await w.loop.tick()
        return "parent" in w.done, "child" in w.pending

    assert asyncio.run(go()) == (True, True)


def test_a_backlog_is_forgotten_a_pass_a_tick_and_records_kept_for_jobs_to_run_do_not_hold_it_up(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import streams.done_retention

    monkeypatch.setattr(streams.done_retention, "MAX_PER_PASS", 2)

    async def go() -> list[int]:
        w, _ = worker()
        # two parents kept for a pending child, older than the rest: they come due first at every look
        old = {f"p{i}": done(f"p{i}", age_s=3 * DAY) for i in range(2)}
        rest = {f"j{i}": done(f"j{i}", age_s=2 * DAY) for i in range(5)}
        w.apply(Transition(done={**old, **rest}), partition=C1)
        w.apply(on_submitted(submitted("child", dag_parents=["p0", "p1"]), None, 0.0), partition=C1)
        left = []
        for _ in range(4):  # ticks, no wait between them
            await w.loop.tick()
            left.append(sum(1 for k in rest if k in w.done))
        assert all(k in w.done for k in old)
        return left

    assert asyncio.run(go()) == [5, 3, 1, 0]  # the parents' pass, then two a tick


def test_a_job_done_is_stamped_when_it_ends_and_a_resubmission_of_its_id_is_refused_until_forgotten() -> None:
    async def go() -> tuple[float, str, bool]:
        w, _ = worker()
        before = time.time()
        w.apply(Transition(done={"j": DoneJob(job_id="j", event_id="ev-j", status="finished", attempt=0,
                                              cluster="c1")}), partition=C1)  # fmt: skip
        stamped = w.done["j"]["done_ts"]
        assert stamped >= before
        again = submitted("j").model_copy(update={"event_id": "ev-j-2"})
        refused = on_submitted(again, w.read("done", "j", DoneJob), 0.0).deadletter or ""
        w.done.data["j"]["done_ts"] = stamped - 2 * DAY  # as if it ended two days ago
        w.done_due[:] = [(stamped - 2 * DAY, "j")]
        await w.loop.tick()
        accepted = on_submitted(again, w.read("done", "j", DoneJob), 0.0)
        return stamped - before, refused, "j" in accepted.pending

    _, refused, accepted = asyncio.run(go())
    assert "already submitted" in refused and accepted


def test_a_dag_parent_is_kept_while_its_child_waits_and_forgotten_after() -> None:
    async def go() -> tuple[bool, bool, bool]:
        w, _ = worker()
        w.apply(Transition(done={"parent": done("parent", age_s=2 * DAY)}), partition=C1)
        w.apply(on_submitted(submitted("child", dag_parents=["parent"]), None, 0.0), partition=C1)
        await w.loop.tick()  # (no node: the child stays pending)
        kept = "parent" in w.done and "child" in w.pending
        w.apply(Transition(pending={"child": None}), partition=C1)
        w.loop.retention._next = w.loop.retention._needed_checked = -1e18  # the next pass, and a look at them, due
        await w.loop.tick()
        return kept, "parent" in w.done, "child" in w.pending

    kept, parent_left, child_left = asyncio.run(go())
    assert kept and not parent_left and not child_left


def test_a_gang_member_is_kept_while_its_gang_has_one_to_run_and_its_count_goes_with_it() -> None:
    async def go() -> tuple[tuple[bool, int], tuple[bool, int], tuple[bool, int]]:
        w, _ = worker()
        w.apply(Transition(done={"a": done("a", age_s=2 * DAY, gang_id="g"),
                                 "x": done("x", age_s=2 * DAY, gang_id="h", status="rejected")}), partition=C1)  # fmt: skip
        w.apply(on_submitted(submitted("b", gang_id="g", gang_size=2), None, 0.0), partition=C1)
        await w.loop.tick()
        kept = w.gang_state("c1", "g", 0.0)
        w.apply(Transition(pending={"b": None}), partition=C1)
        w.loop.retention._next = w.loop.retention._needed_checked = -1e18
        await w.loop.tick()
        return kept, w.gang_state("c1", "g", 0.0), w.gang_state("c1", "h", 0.0)

    kept, g, h = asyncio.run(go())
    assert kept == (False, 1)  # a still counts toward the gang b is in
    assert g == (False, 0) and h == (False, 0)  # forgotten, and no longer counted (nor taking gang h down)


def test_another_workers_partition_is_left_to_it() -> None:
    c2 = next(f"c{i}" for i in range(2, 50) if partition_for(f"c{i}", 4) != C1)

    async def go() -> tuple[bool, bool]:
        w, _ = worker()
        w.apply(Transition(done={"mine": done("mine", age_s=2 * DAY),
                                 "theirs": done("theirs", age_s=2 * DAY, cluster=c2)}), partition=C1)  # fmt: skip
        assigned = {tp for tp in w.app.consumer.assignment() if tp.partition != partition_for(c2, 4)}
        w.app.consumer.assignment = lambda: assigned
        await w.loop.tick()
        return "mine" in w.done, "theirs" in w.done

    assert asyncio.run(go()) == (False, True)


def test_a_submission_sent_before_the_watermark_is_not_restored_from_the_logs_whatever_the_retention() -> None:
    """The restore applies a logged submission whose job the tables do not know: a forgotten job's, read back
    within SEMSCHED_RESTORE_WINDOW, would be placed a second time. The watermark holds with the retention
    set to 0 (kept for ever) since."""
    from streams.log_restore import _events

    async def go() -> list[str]:
        w, _ = worker(done_retention_s=0)
        now_ms = time.time() * 1000
        w.forgotten.data[str(C1)] = now_ms / 1000 - DAY
        logged = [(C1, 0, submitted("forgotten").to_bytes(), round(now_ms - (DAY + 10) * 1000)),
                  (C1, 1, submitted("lost").to_bytes(), round(now_ms - 3_600_000))]  # fmt: skip
        return [e.event.job_id for e in _events(w, "jobs.submitted", logged, set())]

    assert asyncio.run(go()) == ["lost"]


def test_a_lifecycle_report_of_a_forgotten_job_is_not_restored_from_the_logs() -> None:
    """Held as an early report, it would wait for a submission that is refused, then fence a run long over."""
    from scheduling.events import JobLifecycle
    from streams.log_restore import _events

    async def go() -> list[str]:
        w, _ = worker()
        now_ms = time.time() * 1000
        w.forgotten.data[str(C1)] = now_ms / 1000 - DAY

        def report(job_id: str) -> bytes:
            return JobLifecycle(job_id=job_id, cluster="c1", state="started", attempt=0, decision_id=f"d-{job_id}",
                                node_id="n1").to_bytes()  # fmt: skip

        logged = [(C1, 0, report("forgotten"), round(now_ms - (DAY + 10) * 1000)),
                  (C1, 1, report("early"), round(now_ms - 1000))]  # fmt: skip
        return [e.event.job_id for e in _events(w, "jobs.lifecycle", logged, set())]

    assert asyncio.run(go()) == ["early"]


def test_a_record_from_before_the_stamp_is_stamped_then_forgotten_a_retention_later() -> None:
    async def go() -> tuple[float, bool]:
        w, _ = worker()
        legacy = done("legacy", age_s=0).model_dump(mode="json")
        del legacy["done_ts"]
        w.done.data["legacy"] = legacy  # as Faust's recovery writes it
        w.loop._gangs_scanned = False  # (as after a recovery: the loop indexes the table again)
        await w.loop.tick()
        stamp = w.done["legacy"].get("done_ts", 0.0)
        w.done.data["legacy"]["done_ts"] = stamp - 2 * DAY
        w.done_due[:] = [(stamp - 2 * DAY, "legacy")]
        w.loop.retention._next = w.loop.retention._needed_checked = -1e18
        await w.loop.tick()
        return stamp, "legacy" in w.done

    stamp, left = asyncio.run(go())
    assert abs(stamp - time.time()) < 60 and not left


def test_a_retention_of_zero_keeps_every_job() -> None:
    async def go() -> bool:
        w, _ = worker(done_retention_s=0)
        w.apply(Transition(done={"old": done("old", age_s=365 * DAY)}), partition=C1)
        await w.loop.tick()
        return "old" in w.done

    assert asyncio.run(go())


def test_a_gang_member_deleted_by_a_recovery_no_longer_counts_after_it() -> None:
    """Faust's recovery (a partition given to this worker, its owner had forgotten a member) deletes records
    without Worker.apply: the loop's index of the gangs is built again from the table, not added to."""

    async def go() -> tuple[tuple[bool, int], tuple[bool, int]]:
        w, _ = worker()
        w.apply(Transition(done={"m": done("m", age_s=0, gang_id="g", status="rejected")}), partition=C1)
        before = w.gang_state("c1", "g", 0.0)
        del w.done.data["m"]  # as the recovery applies the owner's tombstone
        w.loop._gangs_scanned = False  # (an assignment: the loop indexes the table again)
        await w.loop.tick()
        return before, w.gang_state("c1", "g", 0.0)

    assert asyncio.run(go()) == ((True, 0), (False, 0))


def test_a_job_id_used_again_once_forgotten_is_placed_under_decision_ids_of_its_own() -> None:
    """Agents that remember the first job's decisions would take the same ids for repeats and drop them."""
    from scheduling.events import decision_id_for
    from tests.streams.loop_helpers import c1_node

    async def go() -> str:
        w, _ = worker()
        w.nodes.data["n1"] = c1_node("n1")
        w.apply(Transition(done={"j": done("j", age_s=2 * DAY)}), partition=C1)
        await w.loop.tick()  # forgotten
        assert "j" not in w.done
        again = submitted("j").model_copy(update={"event_id": "ev-j-again"})
        w.apply(on_submitted(again, None, 0.0), partition=C1)
        await w.loop.tick()
        return w.running["j"]["decision_id"]

    placed = asyncio.run(go())
    assert placed != decision_id_for("j", 0, "ev-j") and placed == decision_id_for("j", 0, "ev-j-again")
