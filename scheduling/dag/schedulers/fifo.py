"""FIFO: ready tasks in the order they became ready (a task becomes ready at the step its
last parent is placed; entry tasks first; ties by task index), each to the processor where
it finishes earliest, appended after that processor's last task (no insertion). The
baseline without look-ahead that list schedulers and learned policies are compared with.
"""

from __future__ import annotations

import numpy as np

from scheduling.dag.env import ListSchedulingEnv
from scheduling.dag.schedulers.base import ListScheduler
from scheduling.dag.schedulers.registry import register_dag_scheduler


@register_dag_scheduler("fifo")
class Fifo(ListScheduler):
    name = "fifo"
    insertion = False

    def select_task(self, env: ListSchedulingEnv) -> int:
        ready = env.ready
        return int(ready[np.lexsort((ready, env.ready_since[ready]))[0]])
