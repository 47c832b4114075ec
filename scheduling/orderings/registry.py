"""The ordering registry: ``register_ordering(name)(factory)``, ``get_ordering(name, **kwargs)``.

Separate from the placement registry (:mod:`scheduling.policies.registry`), which composes
the two under ``"<ordering>+<placement>"``. Importing :mod:`scheduling.orderings` imports
every ordering module, which registers itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scheduling.orderings.base import Ordering
from scheduling.registry import Registry, UnknownNameError

F = TypeVar("F", bound=Callable[..., Any])


class UnknownOrderingError(UnknownNameError):
    """No ordering registered under that name; the message lists the available ones."""


ORDERINGS: Registry[Ordering] = Registry("ordering", UnknownOrderingError, reserved="+")


def register_ordering(name: str) -> Callable[[F], F]:
    """Decorator: register ``factory`` under ``name`` (no ``+``: it separates ordering and placement)."""
    return ORDERINGS.register(name)


def unregister_ordering(name: str) -> None:
    ORDERINGS.unregister(name)


def available_orderings() -> list[str]:
    return ORDERINGS.names()


def get_ordering(name: str, **kwargs: Any) -> Ordering:
    """A new ordering instance; raises :class:`UnknownOrderingError` naming the known ones."""
    return ORDERINGS.get(name, **kwargs)
