"""The worker's ``/status`` (streams/web.py) says when its counts are partial: while the tables recover or
a restore runs, and until the loop has caught up and schedules (found by a chaos run: a restarted
worker's status showed half its tables, fin=1000 of ~1,450 done, and nothing said so)."""

from __future__ import annotations

from streams.web import status
from tests.streams.loop_helpers import stood_in_worker


async def test_status_says_while_the_worker_recovers_and_once_it_schedules() -> None:
    w, _ = stood_in_worker()
    loop = w.loop  # type: ignore[attr-defined]
    w.restoring = 1  # an input-log restore under way (streams/log_restore.py)
    await loop.tick()
    assert (status(w)["recovering"], status(w)["scheduling"]) == (True, False)
    w.restoring = 0
    await loop.tick()
    assert (status(w)["recovering"], status(w)["scheduling"]) == (False, True)
    w.app.tables.recovery.completed.clear()  # Faust's table recovery after a rebalance
    assert status(w)["recovering"] is True
