"""Metrics, each defined once: the simulator, the reports and the archive's SQL results
all go through these definitions."""

from scheduling.metrics.allocation import AllocationSample, Holding, allocation_over_time, mean_allocation
from scheduling.metrics.dag import (
    DagMetrics,
    critical_path_min,
    critical_path_min_length,
    dag_metrics,
    sequential_time,
    slr,
    speedup,
)
from scheduling.metrics.distribution import Distribution
from scheduling.metrics.fragmentation import (
    PodType,
    Workload,
    cluster_fragmentation,
    fragmentation_rate,
    node_fragmentation,
    partial_gpu_ratio,
)
from scheduling.metrics.jobs import JobMetrics, JobOutcome, job_metrics
from scheduling.metrics.stability import order_agreement, placement_stability

__all__ = [
    "AllocationSample",
    "DagMetrics",
    "critical_path_min",
    "critical_path_min_length",
    "dag_metrics",
    "sequential_time",
    "slr",
    "speedup",
    "Distribution",
    "Holding",
    "PodType",
    "Workload",
    "cluster_fragmentation",
    "fragmentation_rate",
    "node_fragmentation",
    "partial_gpu_ratio",
    "JobMetrics",
    "JobOutcome",
    "allocation_over_time",
    "mean_allocation",
    "job_metrics",
    "order_agreement",
    "placement_stability",
]
