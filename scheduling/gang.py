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
    its members together need more cpu, memory, GPU milli or whole GPUs than all the nodes any of
    them could use (the default filters on the empty cluster) have. A necessary condition only, so
    never a false refusal; kept per node table and member shapes."""
    from scheduling.filters.framework import filter_shape, run_filters

    if snapshot.num_nodes == 0:
        return None
    known: dict[frozenset, tuple[str, int, int, int] | None] = snapshot.static_cache(
        "scheduling:gang-never-fits", lambda _: {})  # (what falls short: not the message, which names the gang)
    key = frozenset(Counter(filter_shape(m) for m in members).items())  # (shapes hold None: not sortable)
    if key not in known:
        if len(known) >= 1024:
            known.clear()
        empty = snapshot.empty()
        usable = np.zeros(snapshot.num_nodes, dtype=bool)
        for m in members:
            usable |= run_filters(m, empty, None, explain=False).feasible_mask
        t = snapshot.table
        have = {"whole GPUs": int(t.num_gpu[usable].sum()), "GPU milli": int(t.gpu_cap_milli[usable].sum()),
                "cpu milli": int(t.cpu_cap[usable].sum()), "MiB of memory": int(t.mem_cap[usable].sum())}
        need = {"whole GPUs": sum(m.num_gpu for m in members if m.per_gpu_milli >= FULL_GPU_MILLI),
                "GPU milli": sum(m.gpu_demand_milli for m in members), "cpu milli": sum(m.cpu_milli for m in members),
                "MiB of memory": sum(m.memory_mib for m in members)}  # fmt: skip
        short = next((k for k in need if need[k] > have[k]), None)  # (the first: whole GPUs short is GPU milli short)
        known[key] = None if short is None else (short, need[short], have[short], int(usable.sum()))
    if (found := known[key]) is None:
        return None
    short, needed, had, nodes = found
    return (f"gang {gang_id} never fits this cluster: its {len(members)} members together need {needed:,} "
            f"{short} against {had:,} on the {nodes} node(s) they could use, even when empty")  # fmt: skip


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
