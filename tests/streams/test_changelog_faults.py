"""SEMSCHED_FAULT_LOSE_CHANGELOG: the job tables' changelog writes after the first N are lost,
the tables in memory go on; a malformed value is refused by name."""

from __future__ import annotations

import pytest

from streams.app import Worker
from streams.changelog_faults import ENV, ChangelogFaults
from streams.state import PendingJob, Transition
from tests.streams.test_faust_agents import Sent, job, worker

__all__ = ["worker"]  # the fixture


def test_writes_after_the_first_n_are_lost(worker: tuple[Worker, Sent], monkeypatch: pytest.MonkeyPatch) -> None:
    w, _ = worker
    sent: list[tuple[str, int | None]] = []
    for table in (w.pending, w.running, w.done):
        monkeypatch.setattr(table, "send_changelog", lambda p, k, v, *a, _t=table.name, **kw: sent.append((_t, p)))
    faults = ChangelogFaults("2")
    faults.install([w.pending, w.running, w.done])
    for i in range(4):
        p = PendingJob(job=job(f"j{i}"), submit_ts=0.0, queued_ts=0.0)
        w.apply(Transition(pending={p.job.job_id: p}), partition=1)
    assert sent == [("pending", 1), ("pending", 1)] and (faults.sent, faults.lost) == (2, 2)
    assert set(w.pending) == {"j0", "j1", "j2", "j3"}  # the tables in memory go on


def test_nothing_is_lost_by_default(worker: tuple[Worker, Sent]) -> None:
    w, _ = worker
    before = w.pending.send_changelog
    ChangelogFaults("").install([w.pending])
    assert w.pending.send_changelog == before


@pytest.mark.parametrize("spec", ["x", "-1", "3 writes"])
def test_a_malformed_value_names_the_variable(spec: str) -> None:
    with pytest.raises(ValueError, match=f"{ENV}: .* is not a number of writes"):
        ChangelogFaults(spec)
