"""Alibaba GPU 2025 (cluster-trace-gpu-v2025, GPU-disaggregated DLRM serving; CC BY 4.0)
→ canonical events.

File: ``traces/alibaba-gpu-2025/disaggregated_DLRM_trace.csv`` (23,871 instances of 156
apps), one row per inference instance → one :class:`JobSubmitted` (cluster ``dlrm2025``):

- ``job_id`` = ``name`` = ``instance_sn``; ``app`` = ``app_name``; ``qos="LS"`` (the
  trace's README: every instance is latency-sensitive).
- ``cpu_milli`` = ``cpu_request`` cores × 1000; ``memory_mib`` = ``memory_request`` GiB ×
  1024 (rounded up: never under-request).
- ``gpu_request``: 0 → CPU-only; a whole number n → ``num_gpu=n, gpu_milli=1000``; a
  fraction 0 < g < 1 → ``num_gpu=1, gpu_milli=round(1000 g)``; a fraction above 1 is a bad
  line. (The shared file holds only 0 and 1: CN instances 0, HN instances 1.)
- ``max_instances_per_node`` = ``max_instance_per_node`` (-1 → None; 0 or < -1 is a bad line).
- labels: ``role`` (CN / HN), and the same as ``pool``, which the node-pool filter reads (the nodes'
  ``topology["pool"]``: each pool's instances run on its own nodes), ``rdma_request_pct``,
  ``disk_request_gib`` (the contract has no disk or RDMA fields), ``lifetime`` (see below), ``trace``.

Times (seconds from the trace start; empty = outside the trace window):

- created in the window: ``offset_s = creation_time``; ``trace_duration_s = deletion_time -
  scheduled_time`` when both exist (``lifetime=complete``), else None
  (``lifetime=beyond_window``: still running at the end).
- no ``creation_time`` (7,280 rows): the instance already ran when the trace began. Kept by
  default as base load submitted at ``offset_s = 0`` with ``lifetime=created_before_window``;
  ``trace_duration_s = deletion_time`` (its remaining life from the trace start) when
  deleted in the window, else None. ``include_preexisting=False`` drops them (counted as
  ``preexisting_dropped``).

The trace has no node list; the inventory is synthesised, see :mod:`ops.traces.dlrm_inventory`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from ops.traces.base import TraceJob, TraceLoader, check_offset, parse_float, parse_int
from ops.traces.dlrm_inventory import NodeShape, synthesize_inventory
from ops.traces.paths import traces_dir
from scheduling.events import JobSubmitted, NodeTelemetry
from scheduling.gpu_models import KNOWN_GPU_MODELS
from scheduling.job import POOL_LABEL

HEADER = ["instance_sn", "role", "app_name", "cpu_request", "cpu_limit", "gpu_request", "gpu_limit",
          "rdma_request", "rdma_limit", "memory_request", "memory_limit", "disk_request", "disk_limit",
          "max_instance_per_node", "creation_time", "scheduled_time", "deletion_time"]  # fmt: skip
FILE = "disaggregated_DLRM_trace.csv"
CLUSTER = "dlrm2025"
ROLES = ("CN", "HN")


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def gpu_fields(g: float) -> tuple[int, int]:
    """``gpu_request`` → ``(num_gpu, gpu_milli)``."""
    if g < 0:
        raise ValueError(f"gpu_request={_num(g)} is negative")
    if g == 0:
        return 0, 0
    if g < 1:
        return 1, max(1, round(g * 1000))
    if g != int(g):
        raise ValueError(f"gpu_request={_num(g)}: fractional GPUs above 1 cannot be expressed")
    return int(g), 1000


class DlrmLoader(TraceLoader):
    """``DlrmLoader(path=None, include_preexisting=True, cluster="dlrm2025", cn_nodes=None,
    hn_nodes=None, cn_shape=None, hn_shape=None, headroom=1.2, **selection)``."""

    name = "dlrm2025"
    summary = (
        "Alibaba GPU 2025 DLRM serving: 23,871 CN/HN instances of 156 apps; synthesised nodes (CC BY 4.0)"
    )

    def __init__(self, path: str | Path | None = None, *, include_preexisting: bool = True,
                 cluster: str = CLUSTER, cn_nodes: int | None = None, hn_nodes: int | None = None,
                 cn_shape: NodeShape | None = None, hn_shape: NodeShape | None = None,
                 headroom: float = 1.2, **opts: object) -> None:  # fmt: skip
        super().__init__(path, **opts)  # type: ignore[arg-type]
        if not isinstance(include_preexisting, bool):  # a --option value read as JSON: true or false
            raise ValueError(f"include_preexisting must be true or false, not {include_preexisting!r}")
        for name, count in (("cn_nodes", cn_nodes), ("hn_nodes", hn_nodes)):  # (-o values are read as JSON)
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                raise ValueError(f"{name} must be a whole number of nodes >= 0, not {count!r}")
        if isinstance(headroom, bool) or not isinstance(headroom, int | float) or not headroom >= 1:
            raise ValueError(f"headroom must be a number >= 1, not {headroom!r}")
        shapes = {"CN": _shape("cn_shape", cn_shape), "HN": _shape("hn_shape", hn_shape)}
        self.csv_path = self.path / FILE if self.path.is_dir() else self.path
        self.include_preexisting = include_preexisting
        self.cluster = cluster
        self.node_counts = {"CN": cn_nodes, "HN": hn_nodes}
        self.shapes = shapes
        self.headroom = float(headroom)
        self.sizing: dict[str, dict[str, float]] = {}

    @property
    def jobs_file(self) -> Path:
        return self.csv_path

    @classmethod
    def default_path(cls) -> Path:
        return traces_dir() / "alibaba-gpu-2025" / FILE

    def _parse_nodes(self, jobs: list[TraceJob]) -> Iterator[NodeTelemetry]:
        nodes, self.sizing = synthesize_inventory(
            jobs, cluster=self.cluster, counts=self.node_counts, shapes=self.shapes, headroom=self.headroom
        )
        return iter(nodes)

    def _parse_jobs(self) -> Iterable[TraceJob]:
        seen: dict[str, int] = {}
        for line, row in self._rows(self.csv_path, header=HEADER):
            try:
                job = self._instance(row, seen)
                if job is not None:
                    self._on_the_wire(job.event)
            except (ValueError, ValidationError) as e:
                self._bad_exc(self.csv_path, line, e)
                continue
            if job is not None:
                seen[job.event.job_id] = line
                yield job

    def _instance(self, row: list[str], seen: dict[str, int]) -> TraceJob | None:
        sn, role, app = row[0].strip(), row[1].strip(), row[2].strip()
        if not sn:
            raise ValueError("instance_sn is empty")
        if sn in seen:
            raise ValueError(f"duplicate instance {sn!r} (first at line {seen[sn]})")
        if role not in ROLES:
            raise ValueError(f"role must be CN or HN, not {role!r}")
        created = parse_float(row[14], "creation_time", required=False)
        if created is not None:
            check_offset(created, "creation_time")
        scheduled = parse_float(row[15], "scheduled_time", required=False)
        deleted = parse_float(row[16], "deletion_time", required=False)
        if created is None:
            if not self.include_preexisting:
                self.stats.note("preexisting_dropped")
                return None
            offset, lifetime, duration = 0.0, "created_before_window", deleted
            self.stats.note("preexisting")
        else:
            offset = created
            if scheduled is not None and deleted is not None:
                if deleted < scheduled:
                    raise ValueError(f"deletion_time {_num(deleted)} before scheduled_time {_num(scheduled)}")
                lifetime, duration = "complete", deleted - scheduled
            else:
                lifetime, duration = "beyond_window", None
        num_gpu, gpu_milli = gpu_fields(parse_float(row[5], "gpu_request"))  # type: ignore[arg-type]
        if role == "CN" and num_gpu:  # (found by review: the CPU pool's nodes grew GPUs of no model, and the
            # inventory failed with a validation dump naming no line)
            raise ValueError(f"a CN (CPU node) instance asks for no GPUs: gpu_request is {row[5].strip()}")
        cpu = parse_float(row[3], "cpu_request")
        mem = parse_float(row[9], "memory_request")
        mipn = parse_int(row[13], "max_instance_per_node", required=False)
        if mipn is not None and (mipn == 0 or mipn < -1):
            raise ValueError(f"max_instance_per_node={mipn}: expected -1 (none) or >= 1")
        rdma = parse_float(row[7], "rdma_request", required=False)
        disk = parse_float(row[11], "disk_request", required=False)
        # (pool: the node-pool filter keeps each pool's instances on its own nodes; found by review, CN instances
        # filled the GPU nodes' CPUs)
        labels = {"trace": self.name, "role": role, POOL_LABEL: role, "lifetime": lifetime}
        if rdma is not None:
            labels["rdma_request_pct"] = _num(rdma)
        if disk is not None:
            labels["disk_request_gib"] = _num(disk)
        event = JobSubmitted(
            job_id=sn, name=sn, cluster=self.cluster, app=app or None, qos="LS",
            cpu_milli=math.ceil(cpu * 1000 - 1e-9), memory_mib=math.ceil(mem * 1024 - 1e-9),  # type: ignore[operator]
            num_gpu=num_gpu, gpu_milli=gpu_milli,
            max_instances_per_node=None if mipn in (None, -1) else mipn,
            labels=labels, trace_duration_s=duration,
        )  # fmt: skip
        return TraceJob(offset_s=offset, event=event, started_s=scheduled if created is not None else 0.0,
                        ended_s=deleted)  # (an instance created before the window already ran at 0)


def _shape(name: str, value: object) -> NodeShape | None:
    """A node shape option: a :class:`NodeShape`, or its fields as a JSON object (``-o cn_shape='{...}'``)."""
    if value is None or isinstance(value, NodeShape):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be an object with cpu_milli, memory_mib[, num_gpu, gpu_model], not {value!r}")
    try:
        shape = NodeShape(**value)
    except TypeError as e:
        raise ValueError(f"{name}: {e}") from None
    for field in ("cpu_milli", "memory_mib", "num_gpu"):
        v = getattr(shape, field)
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if field != "num_gpu" else 0):
            raise ValueError(f"{name}.{field} must be a whole number {'>= 1' if field != 'num_gpu' else '>= 0'}, not {v!r}")
    if name == "hn_shape" and not shape.num_gpu:  # the GPU pool's instances ask for GPUs: its nodes need a model
        raise ValueError(f"{name}.num_gpu must be >= 1: HN nodes are the GPU nodes")
    if shape.num_gpu and shape.gpu_model not in KNOWN_GPU_MODELS:
        raise ValueError(f"{name}.gpu_model must be one of {sorted(KNOWN_GPU_MODELS)} for a node with GPUs, "
                         f"not {shape.gpu_model!r}")  # fmt: skip
    return shape
