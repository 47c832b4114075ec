"""Gang bookkeeping: which pending jobs belong together and whether a gang is complete.

A gang (``gang_id`` with ``gang_size > 1``) is placed all-or-nothing in one step; until
all ``gang_size`` members are pending it waits. A job naming a gang's id with another
``gang_size`` (1 included) is one of its members, so the disagreement is found and said.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from scheduling.job import JobRequest
from scheduling.resources import FULL_GPU_MILLI
from scheduling.snapshot import ClusterSnapshot


def group_gangs(jobs: Sequence[JobRequest]) -> dict[str, list[JobRequest]]:
    """Gang id → its pending members, in the order given: every job with the id of a gang (a
    ``gang_id`` some job gives with ``gang_size > 1``)."""
    ids = {job.gang_id for job in jobs if job.is_gang}
    gangs: dict[str, list[JobRequest]] = {}
    for job in jobs:
        if job.gang_id in ids:
            gangs.setdefault(job.gang_id, []).append(job)  # type: ignore[arg-type]
    return gangs


def gang_never_fits(gang_id: str, members: Sequence[JobRequest], snapshot: ClusterSnapshot) -> str | None:
    """Why the whole gang can never run in this cluster, though each member alone could, else ``None``:
    its members together, or those of one shape, need more cpu, memory, GPU milli or whole GPUs than
    all the nodes they could use (the default filters on the empty cluster) have; or more members of
    an app than its ``max_instances_per_node`` lets those nodes hold. Necessary conditions only, so
    never a false refusal; kept per node table and member shapes. (Found by review: the members of one
    shape, and an app's limit, were not checked, and such gangs waited for ever.)"""
    from scheduling.filters.framework import filter_shape, run_filters

    if snapshot.num_nodes == 0:
        return None
    known: dict[frozenset, str | None] = snapshot.static_cache(
        "scheduling:gang-never-fits", lambda _: {})  # (what falls short: not the message's start, which names the gang)
    key = frozenset(Counter(filter_shape(m) for m in members).items())  # (shapes hold None: not sortable)
    if key not in known:
        if len(known) >= 1024:
            known.clear()
        empty = snapshot.empty()
        by_shape: dict[object, tuple[list[JobRequest], np.ndarray]] = {}
        for m in members:
            shape = filter_shape(m)
            if shape not in by_shape:
                by_shape[shape] = ([], run_filters(m, empty, None, explain=False).feasible_mask)
            by_shape[shape][0].append(m)
        known[key] = _shortfall(list(members), by_shape, snapshot)
    found = known[key]
    return None if found is None else f"gang {gang_id} never fits this cluster: {found}"


def _shortfall(members: list[JobRequest], by_shape: dict[object, tuple[list[JobRequest], np.ndarray]],
               snapshot: ClusterSnapshot) -> str | None:  # fmt: skip
    """:func:`gang_never_fits`'s reason without the gang's name, else ``None``."""
    t = snapshot.table
    groups = [("its {n} members together", members, np.logical_or.reduce([mask for _, mask in by_shape.values()]))]
    if len(by_shape) > 1:
        groups += [("its {n} members of one shape", group, mask) for group, mask in by_shape.values() if len(group) > 1]
    for what, group, usable in groups:
        have = {"whole GPUs": int(t.num_gpu[usable].sum()), "GPU milli": int(t.gpu_cap_milli[usable].sum()),
                "cpu milli": int(t.cpu_cap[usable].sum()), "MiB of memory": int(t.mem_cap[usable].sum())}
        need = {"whole GPUs": sum(m.num_gpu for m in group if m.per_gpu_milli >= FULL_GPU_MILLI),
                "GPU milli": sum(m.gpu_demand_milli for m in group), "cpu milli": sum(m.cpu_milli for m in group),
                "MiB of memory": sum(m.memory_mib for m in group)}  # fmt: skip
        short = next((k for k in need if need[k] > have[k]), None)  # (the first: whole GPUs short is GPU milli short)
        if short is not None:
            return (f"{what.format(n=len(group))} need {need[short]:,} {short} against {have[short]:,} on the "
                    f"{int(usable.sum())} node(s) they could use, even when empty")  # fmt: skip
    for app in sorted({m.app for m in members if m.app and m.max_instances_per_node}):
        limited = [(m, mask) for group, mask in by_shape.values() for m in group
                   if m.app == app and m.max_instances_per_node]  # fmt: skip
        nodes = int(np.logical_or.reduce([mask for _, mask in limited]).sum())
        most = max(m.max_instances_per_node or 0 for m, _ in limited) * nodes
        if len(limited) > most:
            return (f"its {len(limited)} members of app {app} may run at most {most} at once on the {nodes} "
                    f"node(s) they could use (max_instances_per_node)")  # fmt: skip
    return None


def gang_problem(gang_id: str, members: list[JobRequest]) -> tuple[str, bool] | None:
    """``(reason, permanent)`` when the gang cannot be attempted now, else ``None``."""
    sizes = {m.gang_size for m in members}
    if len(sizes) > 1:
        return f"gang {gang_id}: members disagree on gang_size ({sorted(sizes)})", True
    size = sizes.pop()
    if len(members) > size:
        return f"gang {gang_id}: {len(members)} members pending but gang_size is {size}", True
    if len(members) < size:
        return (f"gang {gang_id}: waiting for {size - len(members)} more member(s) "
                f"({len(members)}/{size} pending)"), False  # fmt: skip
    return None
