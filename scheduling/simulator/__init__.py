"""The offline discrete-event simulator: trace events in, the worker's own policy code
(:func:`scheduling.assign.schedule_step`) on a virtual clock, job outcomes and step
records out. See :mod:`scheduling.simulator.engine`."""

from scheduling.simulator.config import SimConfig
from scheduling.simulator.engine import Simulator, simulate
from scheduling.simulator.load import LOAD_LEVELS, LoadPlan, offered_peak, plan_load
from scheduling.simulator.result import SimResult, StepRecord
from scheduling.simulator.speeds import HETEROGENEITY_LEVELS, node_speeds
from scheduling.simulator.workload import SimJob, Workload, build_workload

__all__ = [
    "HETEROGENEITY_LEVELS",
    "LOAD_LEVELS",
    "LoadPlan",
    "SimConfig",
    "SimJob",
    "SimResult",
    "Simulator",
    "StepRecord",
    "Workload",
    "build_workload",
    "node_speeds",
    "offered_peak",
    "plan_load",
    "simulate",
]
