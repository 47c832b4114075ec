"""The ledger of what the running table holds (streams/held_ledger.py): read back only where
``Worker.apply`` wrote, journaled per cluster, read whole after an invalidation."""

from __future__ import annotations

from typing import Any

from scheduling.job import JobRequest
from streams import held_ledger
from streams.held_ledger import HeldLedger, Holding


def row(decision: str, node: str, gpus: list[int], cluster: str = "a", state: str = "reserved") -> dict[str, Any]:
    return {"decision_id": decision, "node_id": node, "gpu_indices": gpus, "state": state, "job": {"cluster": cluster}}


class Table(dict[str, Any]):
    """The running table, with the ledger told of each write as ``Worker.apply`` does."""

    def __init__(self, ledger: HeldLedger) -> None:
        super().__init__()
        self.ledger, self.parsed = ledger, 0

    def write(self, job_id: str, d: dict[str, Any] | None) -> None:
        if d is None:
            self.pop(job_id, None)
        else:
            self[job_id] = d
        self.ledger.touch(job_id)

    def parse(self, job_id: str) -> Holding | None:
        self.parsed += 1
        d = self[job_id]
        return d["node_id"], JobRequest(job_id, cluster=d["job"]["cluster"], num_gpu=len(d["gpu_indices"]),
                                        per_gpu_milli=500 if d["gpu_indices"] else 0), d["gpu_indices"]  # fmt: skip


def test_only_written_keys_are_read_back_and_each_change_is_journaled_per_cluster() -> None:
    ledger = HeldLedger()
    t = Table(ledger)
    ledger.sync(t, t.parse)  # the first sync reads the (empty) table whole: a new epoch
    assert ledger.epoch == 1 and len(ledger) == 0
    t.write("j1", row("d1", "n1", [0]))
    t.write("j2", row("d2", "n2", [], cluster="b"))
    ledger.sync(t, t.parse)
    assert set(ledger.held("a")) == {"j1"} and set(ledger.held("b")) == {"j2"} and t.parsed == 2
    assert [c[0] for c in ledger.drain("a") or []] == ["j1"]
    assert ledger.drain("a") == []  # drained
    t.write("j1", row("d1", "n1", [0], state="running"))  # started: the same resources
    ledger.sync(t, t.parse)
    assert ledger.drain("a") == [] and t.parsed == 2
    t.write("j1", None)  # finished
    t.write("j3", row("d3", "n1", [1]))
    ledger.sync(t, t.parse)
    changes = ledger.drain("a")
    assert changes is not None and sorted((j, h is None) for j, h in changes) == [("j1", True), ("j3", False)]
    assert set(ledger.held("a")) == {"j3"} and ledger.epoch == 1
    assert [c[0] for c in ledger.drain("b") or []] == ["j2"]  # b's journal waited for its own drain


def test_a_re_placement_replaces_the_holding_and_a_job_id_re_used_elsewhere_leaves_its_cluster() -> None:
    ledger = HeldLedger()
    t = Table(ledger)
    t.write("j", row("d1", "n1", [0]))
    ledger.sync(t, t.parse)
    ledger.drain("a")
    t.write("j", row("d2", "n2", [1]))  # timed out and placed again
    ledger.sync(t, t.parse)
    assert [(j, h and h[0]) for j, h in ledger.drain("a") or []] == [("j", "n2")]
    t.write("j", row("d3", "n9", [], cluster="b"))
    ledger.sync(t, t.parse)
    assert [(j, h) for j, h in ledger.drain("a") or []] == [("j", None)] and set(ledger.held("b")) == {"j"}


def test_invalidate_reads_the_whole_table_in_a_new_epoch_keeping_what_it_had_parsed() -> None:
    ledger = HeldLedger()
    t = Table(ledger)
    t.write("j1", row("d1", "n1", [0]))
    ledger.sync(t, t.parse)
    dict.__setitem__(t, "j2", row("d2", "n2", [1]))  # a write Worker.apply did not see (a changelog recovery)
    ledger.sync(t, t.parse)
    assert set(ledger.held("a")) == {"j1"}  # unseen, as documented
    ledger.invalidate()
    ledger.sync(t, t.parse)
    assert ledger.epoch == 2 and set(ledger.held("a")) == {"j1", "j2"} and t.parsed == 2  # j1 was not parsed again
    assert ledger.drain("a") == []  # a new epoch: the snapshot cache rebuilds instead of replaying a journal


def test_a_journal_past_its_limit_asks_for_a_rebuild(monkeypatch) -> None:
    monkeypatch.setattr(held_ledger, "JOURNAL_LIMIT", 3)
    ledger = HeldLedger()
    t = Table(ledger)
    ledger.sync(t, t.parse)
    for i in range(5):
        t.write(f"j{i}", row(f"d{i}", "n1", []))
    ledger.sync(t, t.parse)
    assert ledger.drain("a") is None and len(ledger.held("a")) == 5


def test_a_row_that_cannot_be_read_fails_the_sync_and_the_next_one_reads_the_whole_table() -> None:
    ledger = HeldLedger()
    t = Table(ledger)
    ledger.sync(t, t.parse)
    t.write("j1", row("d1", "n1", [0]))
    t.write("j2", row("d2", "n2", [1]))
    broken = {"j1"}

    def parse(job_id: str) -> Holding | None:
        if job_id in broken:
            raise ValueError("a row of an older version")
        return t.parse(job_id)

    try:
        ledger.sync(t, parse)
    except ValueError:
        pass
    else:
        raise AssertionError("the error must go up (the step fails and says so)")
    broken.clear()
    ledger.sync(t, parse)
    assert set(ledger.held("a")) == {"j1", "j2"} and ledger.epoch == 2  # nothing left half read


def test_the_same_decision_node_and_gpus_in_another_cluster_is_another_holding() -> None:
    ledger = HeldLedger()
    t = Table(ledger)
    t.write("j", row("d1", "n1", [0], cluster="a"))
    ledger.sync(t, t.parse)
    t.write("j", row("d1", "n1", [0], cluster="b"))  # a job id re-used: same attempt, node name and GPUs
    ledger.sync(t, t.parse)
    assert set(ledger.held("a")) == set() and set(ledger.held("b")) == {"j"}
