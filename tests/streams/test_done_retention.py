"""The done table forgets a job held longer than SEMSCHED_DONE_RETENTION (streams/done_retention.py),
on the real worker loop with the broker stood in. Before, it kept every job for ever: a record a job
(1.7 KB with its parsed copy) and its changelog, read back whole at each restart."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from scheduling.events import JobSubmitted, partition_for
from streams.state import DoneJob, Transition, on_submitted
from tests.streams.loop_helpers import stood_in_worker

PART = partition_for("c1", 4)


def done(job_id: str, **kw: Any) -> DoneJob:
    return DoneJob(**{"job_id": job_id, "event_id": f"ev-{job_id}", "status": "finished", "attempt": 0,
                      "cluster": "c1", **kw})  # fmt: skip


def run(check: Any, **settings: Any) -> None:
    async def go() -> None:
        w, _ = stood_in_worker(policy="best-fit", **settings)
        loop = w.loop  # type: ignore[attr-defined]
        tombstones: list[tuple[int, str]] = []
        w.done.send_changelog = lambda partition, key, value=None, **k: (  # type: ignore[method-assign]
            tombstones.append((partition, key)) if value is None else None)
        await loop.tick()  # owns its partitions now
        loop.done_retention._checked = -float("inf")
        await check(w, loop, tombstones)

    asyncio.run(go())


def age(w: Any, key: str, seconds: float) -> None:
    w.done_since[key] = time.time() - seconds


def test_a_job_held_past_the_retention_is_forgotten_and_its_id_taken_again() -> None:
    async def check(w: Any, loop: Any, tombstones: list) -> None:
        w.apply(Transition(done={"old": done("old"), "new": done("new")}), partition=PART)
        age(w, "old", 101)
        age(w, "new", 99)
        assert await loop.done_retention.check() == 1
        assert "old" not in w.done and "new" in w.done and tombstones == [(PART, "old")]
        assert list(w.done_since) == ["new"]
        # a submission of that id is a new job now (before: dead-lettered as already submitted)
        again = JobSubmitted(job_id="old", event_id="ev-again", cluster="c1", cpu_milli=1, memory_mib=1)
        assert on_submitted(again, w.read("done", "old", DoneJob), 0.0).pending

    run(check, done_retention_s=100)


def test_records_recovered_from_the_changelog_are_timed_from_when_the_worker_first_saw_them() -> None:
    async def check(w: Any, loop: Any, tombstones: list) -> None:
        w.done.data["recovered"] = done("recovered").model_dump(mode="json")  # (Faust's recovery: no apply)
        loop.done_retention.rescan()  # (what the loop does after a recovery or a rebalance)
        assert await loop.done_retention.check() == 0
        assert "recovered" in w.done_since
        age(w, "recovered", 101)
        loop.done_retention._checked = -float("inf")
        assert await loop.done_retention.check() == 1 and "recovered" not in w.done

    run(check, done_retention_s=100)


def test_a_finished_gang_member_no_longer_counts_once_forgotten() -> None:
    async def check(w: Any, loop: Any, tombstones: list) -> None:
        w.apply(Transition(done={"m1": done("m1", gang_id="g"), "m2": done("m2", gang_id="g")}), partition=PART)
        assert w.gang_state("c1", "g") == (False, 2)
        age(w, "m1", 101)
        await loop.done_retention.check()
        assert w.gang_state("c1", "g") == (False, 1)
        age(w, "m2", 101)
        loop.done_retention._checked = -float("inf")
        await loop.done_retention.check()
        assert w.gang_state("c1", "g") == (False, 0) and ("c1", "g") not in w.finished_gang_members

    run(check, done_retention_s=100)


def test_kept_for_ever_with_0_and_never_what_the_worker_cannot_place() -> None:
    async def keep_all(w: Any, loop: Any, tombstones: list) -> None:
        w.apply(Transition(done={"j": done("j")}), partition=PART)
        age(w, "j", 10**9)
        assert await loop.done_retention.check() == 0 and "j" in w.done

    run(keep_all, done_retention_s=0)

    async def keep_unowned(w: Any, loop: Any, tombstones: list) -> None:
        # a record of another worker's partition, and one from before done records named their cluster
        w.apply(Transition(done={"theirs": done("theirs"), "old": done("old", cluster="")}), partition=PART)
        loop.owned = loop.owned - {PART}
        age(w, "theirs", 101)
        age(w, "old", 101)
        assert await loop.done_retention.check() == 0
        assert {"theirs", "old"} <= set(w.done.keys()) and tombstones == [] and not w.done_since

    run(keep_unowned, done_retention_s=100)
