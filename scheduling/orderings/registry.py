"""The ordering registry: ``register_ordering(name)(factory)``, ``get_ordering(name, **kwargs)``.

Separate from the placement registry (:mod:`scheduling.policies.registry`), which composes
the two under ``"<ordering>+<placement>"``. Importing :mod:`scheduling.orderings` imports
every ordering module, which registers itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scheduling.orderings.base import Ordering

F = TypeVar("F", bound=Callable[..., Any])

_ORDERINGS: dict[str, Callable[..., Ordering]] = {}


class UnknownOrderingError(LookupError):
    """No ordering registered under that name; the message lists the available ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def register_ordering(name: str) -> Callable[[F], F]:
    """Decorator: register ``factory`` under ``name`` (no ``+``: it separates ordering and placement)."""
    if not name or name != name.strip() or "+" in name:
        raise ValueError(f"invalid ordering name {name!r}")

    def deco(factory: F) -> F:
        existing = _ORDERINGS.get(name)
        if existing is not None and existing is not factory:
            raise ValueError(f"ordering {name!r} is already registered by {existing!r}")
        _ORDERINGS[name] = factory
        return factory

    return deco


def unregister_ordering(name: str) -> None:
    _ORDERINGS.pop(name, None)


def available_orderings() -> list[str]:
    return sorted(_ORDERINGS)


def get_ordering(name: str, **kwargs: Any) -> Ordering:
    """A new ordering instance; raises :class:`UnknownOrderingError` naming the known ones."""
    factory = _ORDERINGS.get(name)
    if factory is None:
        raise UnknownOrderingError(f"unknown ordering {name!r}; available: {', '.join(available_orderings())}")
    return factory(**kwargs)
