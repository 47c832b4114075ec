"""Loaders for real DAG workflows → :class:`scheduling.dag.DagProblem`.

- :func:`load_topcuoglu` — the 10-task example graph of Topcuoglu et al. (2002) as CSVs;
- :func:`load_wfinstance` — a WfCommons WfInstances file (WfFormat 1.5 JSON), with the
  recorded run's makespan (assumptions in :mod:`ops.workflows.wfinstances`).

A bad file raises :class:`WorkflowFormatError` naming the file and why.
"""

from ops.workflows.errors import WorkflowFormatError
from ops.workflows.paths import topcuoglu_dir, wfinstance_files, wfinstances_dir, workflows_dir
from ops.workflows.topcuoglu import load_topcuoglu
from ops.workflows.wfinstances import MachineSpec, WfInstance, load_wfinstance

__all__ = [
    "MachineSpec",
    "WfInstance",
    "WorkflowFormatError",
    "load_topcuoglu",
    "load_wfinstance",
    "topcuoglu_dir",
    "wfinstance_files",
    "wfinstances_dir",
    "workflows_dir",
]
