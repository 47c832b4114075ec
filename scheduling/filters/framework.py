"""Running the filter chain: the feasible nodes of a job, and why the others are not.

Every rejected node is charged to the FIRST filter (in chain order) that rejects it, so
the counts add up, as in kube-scheduler's ``0/1213 nodes are available: 900
insufficient GPU, 313 GPU model not in [A10].`` :func:`never_fits` runs the same chain
against the empty cluster (all nodes healthy, nothing running) to tell a job that must
wait from one that can never run here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduling.filters.base import Filter
from scheduling.filters.base import explain as explain_rejections
from scheduling.filters.capacity import CapacityFilter
from scheduling.filters.cluster import ClusterFilter
from scheduling.filters.gpu_model import GpuModelFilter
from scheduling.filters.gpu_share import GpuShareFilter
from scheduling.filters.health import HealthFilter
from scheduling.filters.max_instances import MaxInstancesFilter
from scheduling.filters.node_pool import NodePoolFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

DEFAULT_FILTERS: tuple[Filter, ...] = (
    ClusterFilter(),
    NodePoolFilter(),
    HealthFilter(),
    GpuModelFilter(),
    MaxInstancesFilter(),
    CapacityFilter(),
    GpuShareFilter(),
)

#: the filters that read no running job (the node's cluster, pool, health and GPU model): what evicting
#: jobs cannot change (scheduling/simulator/preemption.py picks the victims' node among these)
STATIC_FILTERS: tuple[Filter, ...] = (ClusterFilter(), NodePoolFilter(), HealthFilter(), GpuModelFilter())


@dataclass(frozen=True, eq=False)
class FilterResult:
    """``feasible_mask`` over nodes; ``rejected_by`` filter name → nodes it rejected first."""

    feasible_mask: np.ndarray
    rejected_by: dict[str, int] = field(default_factory=dict)
    reason: str = ""

    @property
    def feasible_count(self) -> int:
        return int(np.count_nonzero(self.feasible_mask))


def run_filters(job: JobRequest, snapshot: ClusterSnapshot, filters: Sequence[Filter] | None = None, *,
                explain: bool = True) -> FilterResult:  # fmt: skip
    """Feasible nodes of ``job``. ``explain=False`` skips the accounting (the fast path)."""
    chain = DEFAULT_FILTERS if filters is None else filters
    n = snapshot.num_nodes
    if not explain:
        feasible = np.ones(n, dtype=bool)
        for f in chain:
            feasible &= f.mask(job, snapshot)
        return FilterResult(feasible)
    feasible = np.ones(n, dtype=bool)
    rejected_by: dict[str, int] = {}
    parts: dict[str, int] = {}
    for f in chain:
        newly = feasible & ~f.mask(job, snapshot)
        count = int(np.count_nonzero(newly))
        if count:
            rejected_by[f.name] = count
            for text, c in explain_rejections(f, job, snapshot, newly):
                parts[text] = parts.get(text, 0) + c
            feasible &= ~newly
    available = int(np.count_nonzero(feasible))
    return FilterResult(feasible, rejected_by, format_reason(available, n, parts))


def format_reason(available: int, total: int, parts: dict[str, int]) -> str:
    """kube-style: ``0/1213 nodes are available: 900 insufficient GPU, 313 GPU model not in [A10].``"""
    if total == 0:
        return "0/0 nodes are available: no nodes in the cluster."
    head = f"{available}/{total} nodes are available"
    if not parts:
        return head + "."
    items = sorted(parts.items(), key=lambda kv: (-kv[1], kv[0]))
    return head + ": " + ", ".join(f"{c} {text}" for text, c in items) + "."


NEVER_FITS_KEPT = 10_000  # job shapes whose never_fits answer a node table keeps (then it starts over)


def filter_shape(job: JobRequest) -> tuple:
    """Everything the filters look at: two jobs of one shape pass the same nodes."""
    return (job.cluster, job.cpu_milli, job.memory_mib, job.num_gpu, job.per_gpu_milli, job.gpu_models,
            job.app, job.max_instances_per_node, job.node_pool)  # fmt: skip


def never_fits(job: JobRequest, snapshot: ClusterSnapshot, filters: Sequence[Filter] | None = None) -> str | None:
    """Why ``job`` can never run in this cluster (even empty and all healthy), else ``None``.

    An empty snapshot (no nodes known yet) returns ``None``: absence of evidence is not a
    reason to reject. The answer depends on the node table and the job's :func:`filter_shape`
    alone, so for the default chain the table keeps it per shape (a replay asks again at every
    step for every shape that does not fit now).
    """
    if snapshot.num_nodes == 0:
        return None
    if filters is not None:
        return _never_fits(job, snapshot, filters)
    known: dict[tuple, str | None] = snapshot.static_cache("scheduling:never-fits", lambda _: {})
    key = filter_shape(job)
    if key not in known:
        if len(known) >= NEVER_FITS_KEPT:
            known.clear()
        known[key] = _never_fits(job, snapshot, None)
    return known[key]


def _never_fits(job: JobRequest, snapshot: ClusterSnapshot, filters: Sequence[Filter] | None) -> str | None:
    result = run_filters(job, snapshot.empty(), filters)
    if result.feasible_count:
        return None
    detail = result.reason.split(": ", 1)[1] if ": " in result.reason else result.reason
    return (f"never fits this cluster: 0/{snapshot.num_nodes} nodes could run {job.describe()} "
            f"even when empty: {detail}")  # fmt: skip
