"""The synthesised node inventory of the DLRM 2025 trace (which publishes no node list).

Assumptions (documented, deterministic, overridable):

- Two pools, as in the paper (Yang et al., NSDI 2025): CPU nodes (CN) run CN instances,
  heterogeneous GPU nodes (HN) run HN instances. Nodes are ``dlrm-cn-0000`` … and
  ``dlrm-hn-0000`` …, with ``topology={"pool": "CN"|"HN"}``; jobs carry ``labels["pool"]`` (and
  ``labels["role"]``), which the node-pool filter (``scheduling/filters/node_pool.py``) matches.
- Node shapes, sized from the largest requests in the trace (the paper gives no shapes):
  CN = 192 cores, 1,024 GiB, no GPU (the largest CN instance asks for 192 cores / 1,000 GiB,
  i.e. a whole node); HN = 8 GPUs, 128 cores, 1,024 GiB (the largest HN instance asks for
  1 GPU with 24 cores or 400 GiB; 8 of the common 16-core/80 GiB instances fill 128 cores).
  The trace does not name the GPU model; HN nodes say ``A10`` (an assumption; pass
  ``hn_shape=NodeShape(..., gpu_model=...)`` to change it). Any shape grows per dimension
  to fit the largest request actually loaded.
- Node count per pool, unless given (``cn_nodes``/``hn_nodes``): the peak concurrent demand
  of the *selected* jobs (sweep over [offset, offset + duration), unknown duration = until
  the end) per dimension divided by the node capacity, times ``headroom`` (default 1.2,
  for bin-packing loss), rounded up; at least enough nodes for every app's
  ``max_instances_per_node`` anti-affinity at its peak concurrency.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ops.traces.base import TraceJob
from scheduling.events import NodeTelemetry


@dataclass(frozen=True)
class NodeShape:
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_model: str | None = None


DEFAULT_SHAPES = {
    "CN": NodeShape(cpu_milli=192_000, memory_mib=1024 * 1024),
    "HN": NodeShape(cpu_milli=128_000, memory_mib=1024 * 1024, num_gpu=8, gpu_model="A10"),
}


def _peak(intervals: Sequence[tuple[float, float, tuple[float, ...]]], dims: int) -> list[float]:
    """Peak of the summed demand vectors over time; an interval ending at t frees before one
    starting at t."""
    events: list[tuple[float, int, tuple[float, ...]]] = []
    for start, end, demand in intervals:
        events.append((start, 1, demand))
        if end != math.inf:
            events.append((end, 0, demand))
    events.sort(key=lambda e: (e[0], e[1]))
    cur, peak = [0.0] * dims, [0.0] * dims
    for _, is_start, demand in events:
        sign = 1 if is_start else -1
        for i, d in enumerate(demand):
            cur[i] += sign * d
            peak[i] = max(peak[i], cur[i])
    return peak


def synthesize_inventory(
    jobs: Sequence[TraceJob], *, cluster: str, counts: dict[str, int | None],
    shapes: dict[str, NodeShape | None], headroom: float = 1.2,
) -> tuple[list[NodeTelemetry], dict[str, dict[str, float]]]:  # fmt: skip
    """The nodes, and per pool the sizing figures (peaks, shape, count) for reports."""
    if headroom < 1:
        raise ValueError("headroom must be >= 1")
    nodes: list[NodeTelemetry] = []
    sizing: dict[str, dict[str, float]] = {}
    for pool in ("CN", "HN"):
        pool_jobs = [j for j in jobs if j.event.labels.get("role") == pool]
        shape = shapes.get(pool) or DEFAULT_SHAPES[pool]
        if pool_jobs:  # grow to fit the largest request
            shape = replace(
                shape,
                cpu_milli=max(shape.cpu_milli, max(j.event.cpu_milli for j in pool_jobs)),
                memory_mib=max(shape.memory_mib, max(j.event.memory_mib for j in pool_jobs)),
                num_gpu=max(shape.num_gpu, max(j.event.num_gpu for j in pool_jobs)),
            )
        intervals = []
        by_app: dict[str, list[tuple[float, float, tuple[float, ...]]]] = defaultdict(list)
        limits: dict[str, int] = {}
        for j in pool_jobs:
            e = j.event
            end = j.offset_s + e.trace_duration_s if e.trace_duration_s is not None else math.inf
            intervals.append((j.offset_s, end, (e.cpu_milli, e.memory_mib, e.gpu_demand_milli / 1000)))
            if e.app and e.max_instances_per_node:
                by_app[e.app].append((j.offset_s, end, (1.0,)))
                limits[e.app] = min(limits.get(e.app, e.max_instances_per_node), e.max_instances_per_node)
        cpu, mem, gpu = _peak(intervals, 3)
        need = max(cpu / shape.cpu_milli, mem / shape.memory_mib, gpu / shape.num_gpu if shape.num_gpu else 0)
        spread = max((math.ceil(_peak(iv, 1)[0] / limits[app]) for app, iv in by_app.items()), default=0)
        n = counts.get(pool)
        if n is None:
            n = max(math.ceil(need * headroom - 1e-9), spread) if pool_jobs else 0
        sizing[pool] = {"nodes": n, "peak_cpu_milli": cpu, "peak_memory_mib": mem, "peak_gpus": gpu,
                        "anti_affinity_min_nodes": spread, "node_cpu_milli": shape.cpu_milli,
                        "node_memory_mib": shape.memory_mib, "node_gpus": shape.num_gpu}  # fmt: skip
        for i in range(n):
            nodes.append(NodeTelemetry(
                node_id=f"dlrm-{pool.lower()}-{i:04d}", cluster=cluster, source="inventory",
                cpu_milli=shape.cpu_milli, memory_mib=shape.memory_mib, num_gpu=shape.num_gpu,
                gpu_model=shape.gpu_model if shape.num_gpu else None,
                topology={"pool": pool, "trace": "dlrm2025", "synthesized": "true"},
            ))  # fmt: skip
    return nodes, sizing
