"""The policy registry: ``register(name)(factory)``, ``get_policy(name, **kwargs)``.

A placement policy module registers its factory (usually the class) on import; importing
:mod:`scheduling.policies` imports every policy module. A plain placement name keeps its
own (FIFO) order. ``"<ordering>+<placement>"`` (``drf+best-fit``, ``sjf-oracle+fgd``)
composes a queue ordering from :mod:`scheduling.orderings` with a placement: see
:class:`~scheduling.orderings.compose.ComposedPolicy`. :func:`available_policies` lists
the placements, :func:`available_orderings` the orderings; :func:`is_policy_name` accepts
both plain and composed names (for validating a CLI option or a setting).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
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
    """The registered placement policies (each usable alone, or after ``<ordering>+``)."""
    return sorted(_REGISTRY)


def available_orderings() -> list[str]:
    """The registered queue orderings (usable as ``<ordering>+<placement>``)."""
    from scheduling.orderings import available_orderings as orderings  # lazy: orderings import policies.base

    return orderings()


def is_policy_name(name: str) -> bool:
    """Whether :func:`get_policy` knows ``name`` (a placement, or ``<ordering>+<placement>``)."""
    if name in _REGISTRY:
        return True
    ordering, plus, placement = name.partition("+")
    return bool(plus) and placement in _REGISTRY and ordering in available_orderings()


def _unknown(name: str) -> UnknownPolicyError:
    return UnknownPolicyError(
        f"unknown policy {name!r}; available: {', '.join(available_policies()) or '(none)'}; "
        f"orderings: {', '.join(available_orderings())} (compose as '<ordering>+<placement>', "
        f"e.g. 'drf+best-fit')"
    )


def get_policy(name: str, *, ordering_options: Mapping[str, Any] | None = None, **kwargs: Any) -> Policy:
    """A new policy instance; raises :class:`UnknownPolicyError` naming the known ones.

    ``kwargs`` go to the placement's factory; ``ordering_options`` to the ordering's
    (only for a composed name, e.g. ``get_policy("las+best-fit", ordering_options={"promote_knob": 4})``).
    """
    factory = _REGISTRY.get(name)
    if factory is None:
        if not is_policy_name(name):
            raise _unknown(name)
        from scheduling.orderings import ComposedPolicy, get_ordering

        ordering_name, _, placement_name = name.partition("+")
        return ComposedPolicy(get_ordering(ordering_name, **dict(ordering_options or {})),
                              get_policy(placement_name, **kwargs))  # fmt: skip
    if ordering_options:
        raise TypeError(f"policy {name!r} is a plain placement: ordering_options need '<ordering>+{name}'")
    policy = factory(**kwargs)
    if getattr(policy, "name", None) != name:
        with contextlib.suppress(AttributeError):  # a factory registered under an alias
            policy.name = name
    return policy
