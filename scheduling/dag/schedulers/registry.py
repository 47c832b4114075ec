"""DAG schedulers by name: ``register_dag_scheduler(name)(factory)``, ``get_dag_scheduler(name)``.

Importing :mod:`scheduling.dag.schedulers` registers HEFT, CPOP and FIFO; a later
scheduler (the learned policy) registers itself the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from scheduling.dag.schedulers.base import DagScheduler
from scheduling.registry import Registry, UnknownNameError

F = TypeVar("F", bound=Callable[..., Any])


class UnknownDagSchedulerError(UnknownNameError):
    """No DAG scheduler under that name; the message lists the known ones."""


DAG_SCHEDULERS: Registry[DagScheduler] = Registry("DAG scheduler", UnknownDagSchedulerError)


def register_dag_scheduler(name: str) -> Callable[[F], F]:
    return DAG_SCHEDULERS.register(name)


def available_dag_schedulers() -> list[str]:
    return DAG_SCHEDULERS.names()


def get_dag_scheduler(name: str, **kwargs: Any) -> DagScheduler:
    """A new scheduler instance; raises :class:`UnknownDagSchedulerError` naming the known ones."""
    return DAG_SCHEDULERS.get(name, **kwargs)


def get_own_dag_scheduler(name: str, **kwargs: Any) -> DagScheduler:
    """:func:`get_dag_scheduler`, refusing one that would stand another in (a learned scheduler
    without its model says so in ``fallback``, and how to get one): never another scheduler's
    numbers under this one's name. ``ValueError`` says why; its fallback warning is left out (the
    error says it, once)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scheduler = get_dag_scheduler(name, **kwargs)
    if fallback := getattr(scheduler, "fallback", None):
        raise ValueError(f"{name} would fall back: {fallback}")
    return scheduler
