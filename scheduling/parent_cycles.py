"""Jobs whose DAG parents wait on each other in a cycle (``a`` waits for ``b``, which waits for
``a``), or wait on such a cycle: none of them can ever start. One definition for the worker's gate
(:mod:`streams.dag_gate`) and the simulator (:mod:`scheduling.simulator.engine`), which both reject
them with the reason."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def waiting_on_a_cycle(parents: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The jobs of ``parents`` (job → its DAG parents, all pending) that wait, directly or through
    other parents, on a cycle of parents; each with one such cycle (``[a, b, a]``). Jobs not in
    ``parents`` (finished, running, not seen) break no cycle: they are left out of the graph.

    Kahn's algorithm removes every job whose parents in the graph are all removed; what stays
    waits on a cycle. O(jobs + parent links)."""
    inside: Callable[[str], bool] = parents.__contains__
    blocking = {job: sum(1 for q in qs if inside(q)) for job, qs in parents.items()}
    children: dict[str, list[str]] = {}
    for job, qs in parents.items():
        for q in qs:
            if inside(q):
                children.setdefault(q, []).append(job)
    free = [job for job, n in blocking.items() if n == 0]
    while free:
        for child in children.get(free.pop(), ()):
            blocking[child] -= 1
            if blocking[child] == 0:
                free.append(child)
    left = {job for job, n in blocking.items() if n > 0}
    return {job: _a_cycle(job, parents, left) for job in sorted(left)}


def _a_cycle(start: str, parents: Mapping[str, Any], left: set[str]) -> list[str]:
    """A cycle reached from ``start`` by following parents that are left (each has one: every job left
    has a parent left), ``[a, b, a]``."""
    seen: dict[str, int] = {}
    path, job = [], start
    while job not in seen:
        seen[job] = len(path)
        path.append(job)
        job = next(q for q in sorted(parents[job]) if q in left)
    return [*path[seen[job]:], job]
