"""``SimConfig``: the simulator's knobs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SimConfig:
    """
    - ``step_s``: scheduling runs on a grid of this many virtual seconds, at the first grid
      point at or after an arrival or a departure (the worker's ``SEMSCHED_STEP``).
    - ``load_factor``: the arrival-rate scaling the jobs were built with, a label for the
      result: the engine does not scale them (``Workload.scaled`` / ``scale_jobs`` divide the
      submit offsets by it beforehand; found by review, the docstring said the engine did).
    - ``speed_spread``: node-speed heterogeneity; each node's speed is drawn uniformly from
      ``[1 − spread, 1 + spread]`` (a job runs ``duration / speed`` on it).
    - ``seed``: node speeds (and anything else random in the run) derive from it.
    - ``record_orders``: keep each step's queue order (head) for the order-agreement
      stability metric.
    - ``fragmentation_every``: sample GPU fragmentation after every n-th step (0 = never).
    - ``preemption_checks``: with a preemptive ordering (``las+…``), how many blocked jobs
      per step (from the head of the queue) may try to evict lower-priority ones.
    """

    step_s: float = 1.0
    load_factor: float = 1.0
    speed_spread: float = 0.0
    seed: int = 0
    record_orders: bool = True
    order_head: int = 200
    fragmentation_every: int = 10
    preemption_checks: int = 32

    def __post_init__(self) -> None:
        if not 0 < self.step_s < float("inf"):  # (nan too; inf: no step ever ran, every job vanished)
            raise ValueError("step_s must be a finite number > 0")
        if not (self.load_factor > 0 and self.load_factor < float("inf")):
            raise ValueError("load_factor must be a finite number > 0")
        if not 0 <= self.speed_spread < 1:
            raise ValueError("speed_spread must be within [0, 1)")
