"""``Registry``: factories by name — one implementation behind the placement policies,
the queue orderings and the DAG schedulers (kube-scheduler's plugin registry, in small).

A module registers its factory (usually the class) on import with ``@registry.register
("name")``; a second, different factory under the same name is an error; ``get(name,
**kwargs)`` builds a new instance or raises the registry's ``UnknownNameError`` subclass,
whose message lists what exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class UnknownNameError(LookupError):
    """No factory under that name; the message lists the available ones."""

    def __str__(self) -> str:  # LookupError would repr() a single argument
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    def __init__(self, kind: str, error: type[UnknownNameError] = UnknownNameError, *,
                 reserved: str = "") -> None:  # fmt: skip
        self.kind = kind  # "policy", "ordering", …: for messages
        self.error = error
        self.reserved = reserved  # characters a name may not contain
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator: register ``factory`` under ``name``."""
        if not name or name != name.strip() or any(c in name for c in self.reserved):
            raise ValueError(f"invalid {self.kind} name {name!r}")

        def deco(factory: F) -> F:
            existing = self._factories.get(name)
            if existing is not None and existing is not factory:
                raise ValueError(f"{self.kind} {name!r} is already registered by {existing!r}")
            self._factories[name] = factory
            return factory

        return deco

    def unregister(self, name: str) -> None:
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def unknown(self, name: str, hint: str = "") -> UnknownNameError:
        return self.error(f"unknown {self.kind} {name!r}; available: {', '.join(self.names()) or '(none)'}{hint}")

    def get(self, name: str, **kwargs: Any) -> T:
        factory = self._factories.get(name)
        if factory is None:
            raise self.unknown(name)
        return factory(**kwargs)
