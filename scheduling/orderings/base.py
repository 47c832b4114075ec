"""The ordering contract and the gang-aware sorting every ordering shares.

An *ordering* decides only which pending job a scheduling step considers first:
``order(jobs, now, context) -> list[JobRequest]`` (``context``: an
:class:`~scheduling.order_context.OrderContext` or ``None``). Placement — which node —
is a separate policy; ``"<ordering>+<placement>"`` composes the two
(:mod:`scheduling.orderings.compose`).

Orderings work on *units*: a single job, or all pending members of one gang
(``gang_id`` with ``gang_size > 1``, as :mod:`scheduling.gang` groups them). A unit is
ranked as a whole and its members come out adjacent, in FIFO order, so a gang is never
interleaved with other jobs. Every key ends with the unit's FIFO key (submit time, then
job id of its earliest member), so the result is deterministic for any input order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.policies.base import fifo_key

__all__ = ["Ordering", "Unit", "fifo_key", "flatten", "group_units", "sort_units", "unit_fifo_key"]

Unit = tuple[JobRequest, ...]


@runtime_checkable
class Ordering(Protocol):
    name: str

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]: ...


def group_units(jobs: Sequence[JobRequest]) -> list[Unit]:
    """Singles and whole gangs, each unit's members in FIFO order (units in first-seen order)."""
    if not any(job.is_gang for job in jobs):
        return [(job,) for job in jobs]
    gangs = {job.gang_id for job in jobs if job.is_gang}  # (a member that gives another gang_size is one too)
    units: dict[tuple[str, str], list[JobRequest]] = {}
    for job in jobs:
        key = ("g", job.gang_id) if job.gang_id in gangs else ("j", job.job_id)
        units.setdefault(key, []).append(job)  # type: ignore[arg-type]
    return [tuple(sorted(members, key=fifo_key)) for members in units.values()]


def unit_fifo_key(unit: Unit) -> tuple[float, str]:
    """The FIFO key of the unit's earliest member."""
    return fifo_key(unit[0])


def flatten(units: Sequence[Unit]) -> list[JobRequest]:
    return [job for unit in units for job in unit]


def sort_units(jobs: Sequence[JobRequest], key: Callable[[Unit], Any]) -> list[JobRequest]:
    """``jobs`` grouped into units, sorted by ``(key(unit), unit FIFO key)``, flattened."""
    units = group_units(jobs)
    units.sort(key=lambda u: (key(u), unit_fifo_key(u)))
    return flatten(units)
