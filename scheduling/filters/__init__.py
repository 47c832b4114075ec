"""Feasibility filters (kube-scheduler's filter phase): hard constraints with reasons.

One module per filter; :mod:`scheduling.filters.framework` chains them.
"""

from scheduling.filters.base import BaseFilter, Filter
from scheduling.filters.capacity import CapacityFilter
from scheduling.filters.cluster import ClusterFilter
from scheduling.filters.framework import DEFAULT_FILTERS, FilterResult, format_reason, never_fits, run_filters
from scheduling.filters.gpu_model import GpuModelFilter
from scheduling.filters.gpu_share import GpuShareFilter
from scheduling.filters.health import HealthFilter
from scheduling.filters.max_instances import MaxInstancesFilter
from scheduling.filters.node_pool import NodePoolFilter

__all__ = [
    "DEFAULT_FILTERS",
    "BaseFilter",
    "CapacityFilter",
    "ClusterFilter",
    "Filter",
    "FilterResult",
    "GpuModelFilter",
    "GpuShareFilter",
    "HealthFilter",
    "MaxInstancesFilter",
    "NodePoolFilter",
    "format_reason",
    "never_fits",
    "run_filters",
]
