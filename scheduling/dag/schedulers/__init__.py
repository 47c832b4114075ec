"""DAG schedulers behind one interface and a lookup by name (``get_dag_scheduler``).

- ``heft``: upward rank, insertion-based earliest finish time (Topcuoglu et al. 2002);
- ``cpop``: upward + downward rank, critical path on one processor (ibid.);
- ``fifo``: ready order, earliest finish without insertion;
- ``heft-rollout``: HEFT's task on every processor, each finished with HEFT, the best taken at
  every step, then a critical-path local search (:mod:`scheduling.dag.rollout`).
"""

from scheduling.dag.schedulers import cpop, fifo, heft, heft_rollout  # noqa: F401 - registers them
from scheduling.dag.schedulers.base import (
    DagScheduler,
    ListScheduler,
    TwoStagePolicy,
    earliest_finish_processor,
    run_policy,
)
from scheduling.dag.schedulers.registry import (
    UnknownDagSchedulerError,
    available_dag_schedulers,
    get_dag_scheduler,
    get_own_dag_scheduler,
    register_dag_scheduler,
)

__all__ = [
    "DagScheduler",
    "ListScheduler",
    "TwoStagePolicy",
    "UnknownDagSchedulerError",
    "available_dag_schedulers",
    "earliest_finish_processor",
    "get_dag_scheduler",
    "get_own_dag_scheduler",
    "register_dag_scheduler",
    "run_policy",
]
