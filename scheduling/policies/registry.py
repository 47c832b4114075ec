"""The policy registry: ``register(name)(factory)``, ``get_policy(name, **kwargs)``.

A policy module registers its factory (usually the class) on import; importing
:mod:`scheduling.policies` imports every policy module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from scheduling.policies.base import Policy

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, Callable[..., Policy]] = {}


class UnknownPolicyError(LookupError):
    """No policy registered under that name; the message lists the available ones."""

    def __str__(self) -> str:  # LookupError would repr() a single argument
        return str(self.args[0]) if self.args else ""


def register(name: str) -> Callable[[F], F]:
    """Decorator: register ``factory`` under ``name`` (a second, different one is an error)."""
    if not name or name != name.strip():
        raise ValueError(f"invalid policy name {name!r}")

    def deco(factory: F) -> F:
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not factory:
            raise ValueError(f"policy {name!r} is already registered by {existing!r}")
        _REGISTRY[name] = factory
        return factory

    return deco


def unregister(name: str) -> None:
    """Remove ``name`` (tests, plug-ins)."""
    _REGISTRY.pop(name, None)


def available_policies() -> list[str]:
    return sorted(_REGISTRY)


def get_policy(name: str, **kwargs: Any) -> Policy:
    """A new policy instance; raises :class:`UnknownPolicyError` naming the known ones."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise UnknownPolicyError(
            f"unknown policy {name!r}; available: {', '.join(available_policies()) or '(none)'}"
        )
    policy = factory(**kwargs)
    if getattr(policy, "name", None) != name:
        with contextlib.suppress(AttributeError):  # a factory registered under an alias
            policy.name = name
    return policy
