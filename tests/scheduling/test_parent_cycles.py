"""Jobs whose DAG parents wait on a cycle (``scheduling/parent_cycles.py``), as the worker's gate and
the simulator reject them."""

from __future__ import annotations

from scheduling.parent_cycles import waiting_on_a_cycle


def test_the_jobs_on_or_behind_a_cycle_of_parents_are_found_with_one_cycle_each() -> None:
    parents = {"a": ["b"], "b": ["c"], "c": ["a"],  # a cycle
               "d": ["a", "x"],  # behind it (x is not pending: finished, or not seen)
               "e": ["x"], "f": ["e"], "g": ["f", "e"],  # a chain: no cycle
               "s": ["s"]}  # fmt: skip
    stuck = waiting_on_a_cycle(parents)
    assert sorted(stuck) == ["a", "b", "c", "d", "s"]
    assert stuck["a"] == ["a", "b", "c", "a"] and stuck["d"] == ["a", "b", "c", "a"] and stuck["s"] == ["s", "s"]
    assert waiting_on_a_cycle({"e": ["x"], "f": ["e"], "g": ["f", "e"]}) == {}
