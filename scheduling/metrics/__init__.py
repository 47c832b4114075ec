"""Metrics, each defined once: the simulator, the reports and the archive's SQL results
all go through these definitions."""

from scheduling.metrics.allocation import AllocationSample, Holding, allocation_over_time

__all__ = ["AllocationSample", "Holding", "allocation_over_time"]
