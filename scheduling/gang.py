"""Gang bookkeeping: which pending jobs belong together and whether a gang is complete.

A gang (``gang_id`` with ``gang_size > 1``) is placed all-or-nothing in one step; until
all ``gang_size`` members are pending it waits.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.job import JobRequest


def group_gangs(jobs: Iterable[JobRequest]) -> dict[str, list[JobRequest]]:
    """Gang id → its pending members, in the order given."""
    gangs: dict[str, list[JobRequest]] = {}
    for job in jobs:
        if job.is_gang:
            gangs.setdefault(job.gang_id, []).append(job)  # type: ignore[arg-type]
    return gangs


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
