"""Queue orderings (which pending job is considered first) and their registry.

Adding an ordering is one new module here that decorates its factory with
``@register_ordering("name")``, plus one import line below. Compose one with a placement
policy as ``get_policy("<ordering>+<placement>")`` (:mod:`scheduling.policies.registry`).
"""

from scheduling.orderings import drf, fifo, gittins, las, priority, sjf_oracle, sjf_predicted  # noqa: F401  (registers)
from scheduling.orderings.base import Ordering, group_units, sort_units
from scheduling.orderings.compose import ComposedPolicy
from scheduling.orderings.registry import (
    UnknownOrderingError,
    available_orderings,
    get_ordering,
    register_ordering,
    unregister_ordering,
)

__all__ = [
    "ComposedPolicy",
    "Ordering",
    "UnknownOrderingError",
    "available_orderings",
    "get_ordering",
    "group_units",
    "register_ordering",
    "sort_units",
    "unregister_ordering",
]
