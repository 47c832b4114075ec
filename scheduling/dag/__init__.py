"""DAG workflows on heterogeneous processors (issue 3, point 7): the model, a step-wise
list-scheduling environment, HEFT / CPOP / FIFO, and a seeded random DAG generator.

Pure numpy, no I/O: loaders for real workflows live in :mod:`ops.workflows`; the metrics
(makespan, speedup, SLR) in :mod:`scheduling.metrics.dag`.
"""

from scheduling.dag.env import IllegalActionError, ListSchedulingEnv, Placement, replay
from scheduling.dag.generator import (
    DagGeneratorConfig,
    check_stream_seed,
    generate_dag,
    held_out_dags,
    training_dags,
)
from scheduling.dag.graph import GraphError, TaskGraph
from scheduling.dag.platform import Platform, PlatformError
from scheduling.dag.problem import DagProblem
from scheduling.dag.schedule import InvalidScheduleError, Schedule, assert_valid_schedule, check_schedule

__all__ = [
    "DagGeneratorConfig",
    "DagProblem",
    "GraphError",
    "IllegalActionError",
    "InvalidScheduleError",
    "ListSchedulingEnv",
    "Placement",
    "Platform",
    "PlatformError",
    "Schedule",
    "TaskGraph",
    "assert_valid_schedule",
    "check_schedule",
    "generate_dag",
    "check_stream_seed",
    "held_out_dags",
    "replay",
    "training_dags",
]
