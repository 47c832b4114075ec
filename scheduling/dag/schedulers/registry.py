"""DAG schedulers by name: ``register_dag_scheduler(name)(factory)``, ``get_dag_scheduler(name)``.

Importing :mod:`scheduling.dag.schedulers` registers HEFT, CPOP and FIFO; a later
scheduler (the learned policy) registers itself the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scheduling.dag.schedulers.base import DagScheduler

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, Callable[..., DagScheduler]] = {}


class UnknownDagSchedulerError(LookupError):
    """No DAG scheduler under that name; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def register_dag_scheduler(name: str) -> Callable[[F], F]:
    if not name or name != name.strip():
        raise ValueError(f"invalid DAG scheduler name {name!r}")

    def deco(factory: F) -> F:
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not factory:
            raise ValueError(f"DAG scheduler {name!r} is already registered by {existing!r}")
        _REGISTRY[name] = factory
        return factory

    return deco


def available_dag_schedulers() -> list[str]:
    return sorted(_REGISTRY)


def get_dag_scheduler(name: str, **kwargs: Any) -> DagScheduler:
    """A new scheduler instance; raises :class:`UnknownDagSchedulerError` naming the known ones."""
    factory = _REGISTRY.get(name)
    if factory is None:
        known = ", ".join(available_dag_schedulers()) or "(none)"
        raise UnknownDagSchedulerError(f"unknown DAG scheduler {name!r}; available: {known}")
    return factory(**kwargs)
