"""Scheduling policies (kube-scheduler's score phase) and their registry.

Adding a policy is one new module here that decorates its factory with
``@register("name")``, plus one import line below.
"""

from scheduling.policies import (  # noqa: F401  (registers on import)
    best_fit,
    dot_product,
    fgd,
    fifo_first_fit,
    gpu_clustering,
    gpu_packing,
    least_allocated,
    random_policy,
)
from scheduling.policies.base import BasePolicy, Policy, fifo_key
from scheduling.policies.registry import (
    UnknownPolicyError,
    available_policies,
    get_policy,
    register,
    unregister,
)

__all__ = [
    "BasePolicy",
    "Policy",
    "UnknownPolicyError",
    "available_policies",
    "fifo_key",
    "get_policy",
    "register",
    "unregister",
]
