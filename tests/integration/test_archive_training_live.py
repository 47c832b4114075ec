"""Training data from a LIVE archive: real openb pods replayed through the broker, the worker
(two policies) and agents that fail a share of the jobs (tests/integration/archive_replay.py).
Every placement the live worker made must be feasible in the state the archive replay
rebuilds — the reconstruction agrees with the worker's own accounting — and only placements
whose attempt finished become demonstrations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inference.training.archive import reconstruct
from inference.training.archive_events import fold_events
from storage.queries.training_events import training_events
from tests.integration.archive_replay import ReplayedArchive, replayed_archive

pytestmark = pytest.mark.integration

EVERY_OUTCOME = ("finished", "failed", "preempted", "timed_out", "running")


@pytest.fixture(scope="module")
def archive(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplayedArchive]:
    a = replayed_archive(kafka_broker, tmp_path_factory)
    yield a
    a.close()


def test_every_live_placement_is_feasible_in_the_rebuilt_state(archive: ReplayedArchive) -> None:
    events = fold_events(training_events(archive.client))
    ends = {p.end_state for p in events.placed}
    assert "finished" in ends and "failed" in ends  # the agents failed some attempts; they were retried
    everything = reconstruct(events, outcomes=EVERY_OUTCOME, min_feasible=1, tied_targets=False)
    assert everything.placed == len(events.placed) > 0
    assert dict(everything.skipped) == {}  # no chosen node infeasible, none unknown, every submission there
    assert set(everything.policies) == set(archive.policies)
    # the state each decision saw, as the worker saw it (lifecycle_through): as many feasible nodes
    feasible = dict(archive.client.query_rows("SELECT decision_id, feasible_nodes FROM decisions_applied "
                                              "WHERE outcome = 'placed'")[1])  # fmt: skip
    assert any(p.lifecycle_through for p in events.placed)
    rebuilt = {d: int(f.sum()) for d, f in zip(everything.decision_ids, everything.demos.feasible, strict=True)}
    assert {d: (n, feasible[d]) for d, n in rebuilt.items() if n != feasible[d]} == {}  # rebuilt, the worker's
    finished = reconstruct(events, min_feasible=1)
    assert len(finished.demos) == sum(p.end_state == "finished" for p in events.placed)
    assert finished.skipped["outcome failed"] == sum(p.end_state == "failed" for p in events.placed) > 0
