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
from scheduling.registry import Registry, UnknownNameError

F = TypeVar("F", bound=Callable[..., Any])


class UnknownPolicyError(UnknownNameError):
    """No policy registered under that name; the message lists the available ones."""


PLACEMENTS: Registry[Policy] = Registry("policy", UnknownPolicyError, reserved="+")


def register(name: str) -> Callable[[F], F]:
    """Decorator: register ``factory`` under ``name`` (a second, different one is an error)."""
    return PLACEMENTS.register(name)


def unregister(name: str) -> None:
    """Remove ``name`` (tests, plug-ins)."""
    PLACEMENTS.unregister(name)


def available_policies() -> list[str]:
    """The registered placement policies (each usable alone, or after ``<ordering>+``)."""
    return PLACEMENTS.names()


def available_orderings() -> list[str]:
    """The registered queue orderings (usable as ``<ordering>+<placement>``)."""
    from scheduling.orderings import available_orderings as orderings  # lazy: orderings import policies.base

    return orderings()


def is_policy_name(name: str) -> bool:
    """Whether :func:`get_policy` knows ``name`` (a placement, or ``<ordering>+<placement>``)."""
    if name in PLACEMENTS:
        return True
    ordering, plus, placement = name.partition("+")
    return bool(plus) and placement in PLACEMENTS and ordering in available_orderings()


def _unknown(name: str) -> UnknownNameError:
    return PLACEMENTS.unknown(name, f"; orderings: {', '.join(available_orderings())} (compose as "
                                    f"'<ordering>+<placement>', e.g. 'drf+best-fit')")  # fmt: skip


def get_policy(name: str, *, ordering_options: Mapping[str, Any] | None = None, **kwargs: Any) -> Policy:
    """A new policy instance; raises :class:`UnknownPolicyError` naming the known ones.

    ``kwargs`` go to the placement's factory; ``ordering_options`` to the ordering's
    (only for a composed name, e.g. ``get_policy("las+best-fit", ordering_options={"promote_knob": 4})``).
    """
    if name not in PLACEMENTS:
        if not is_policy_name(name):
            raise _unknown(name)
        from scheduling.orderings import ComposedPolicy, get_ordering

        ordering_name, _, placement_name = name.partition("+")
        return ComposedPolicy(get_ordering(ordering_name, **dict(ordering_options or {})),
                              get_policy(placement_name, **kwargs))  # fmt: skip
    if ordering_options:
        raise TypeError(f"policy {name!r} is a plain placement: ordering_options need '<ordering>+{name}'")
    policy = PLACEMENTS.get(name, **kwargs)
    if getattr(policy, "name", None) != name:
        with contextlib.suppress(AttributeError):  # a factory registered under an alias
            policy.name = name
    return policy
