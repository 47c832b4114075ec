"""DAG schedulers by name: ``register_dag_scheduler(name)(factory)``, ``get_dag_scheduler(name)``.

Importing :mod:`scheduling.dag.schedulers` registers HEFT, CPOP and FIFO; a later
scheduler (the learned policy) registers itself the same way.
"""

from __future__ import annotations

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
