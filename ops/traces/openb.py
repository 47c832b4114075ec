"""Alibaba GPU 2023 ("openb", cluster-trace-gpu-v2023; CC BY 4.0) → canonical events.

Files (``traces/alibaba-gpu-2023/``):

- node list ``openb_node_list_gpu_node.csv`` (default, 1,213 GPU nodes) or
  ``openb_node_list_all_node.csv`` (``node_list="all"``, 1,523 nodes incl. CPU-only):
  ``sn,cpu_milli,memory_mib,gpu,model`` → :class:`NodeTelemetry` (cluster ``openb``,
  ``source="inventory"``, ``gpu_model`` = model, None for CPU-only nodes).
- pod list ``openb_pod_list_default.csv`` (8,152 pods) or any pod list of the same
  format (``path=`` a pod CSV, or a directory holding the default names):
  ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
  deletion_time,scheduled_time`` → :class:`JobSubmitted`.

Mapping decisions:

- ``job_id`` = ``name`` = pod name; ``offset_s`` = ``creation_time``.
- ``gpu_milli`` is the per-GPU share: the trace's value for GPU-sharing pods
  (``num_gpu == 1``), 1000 for whole-GPU pods, 0 for CPU-only pods; a multi-GPU pod
  with a share < 1000 is a bad line (the contract cannot express it).
- ``gpu_models`` = ``gpu_spec`` split on ``|`` (empty = any model).
- ``labels``: ``pod_phase`` (the outcome in the original cluster), ``trace``.
- ``trace_duration_s`` = ``deletion_time - scheduled_time`` when both are present; otherwise
  None (counted: ``duration_missing``). A deletion before the schedule is a bad line, as are a
  blank ``gpu_milli`` or ``qos`` (none in the published file).
- Pods without ``scheduled_time`` (897 ``Pending`` pods in the default list: never
  placed by the original scheduler) are **kept** — they arrived and demand resources,
  and the FGD reference figures count them — with ``trace_duration_s = None`` and
  label ``pod_phase=Pending``; ``include_unscheduled=False`` drops them (counted as
  ``unscheduled_dropped``). A pod without ``creation_time`` has no arrival time and is a
  bad line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ops.traces.base import TraceJob, TraceLoader, check_offset, parse_float, parse_int
from ops.traces.paths import traces_dir
from scheduling.events import JobSubmitted, NodeTelemetry

NODE_HEADER = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
POD_HEADER = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
              "creation_time", "deletion_time", "scheduled_time"]  # fmt: skip
NODE_FILES = {"gpu": "openb_node_list_gpu_node.csv", "all": "openb_node_list_all_node.csv"}
POD_FILE = "openb_pod_list_default.csv"
CLUSTER = "openb"


class OpenbLoader(TraceLoader):
    """``OpenbLoader(path=None, node_list="gpu"|"all", nodes_path=None, include_unscheduled=True,
    cluster="openb", **selection)``."""

    name = "openb"
    summary = "Alibaba GPU 2023 (openb): 1,213 GPU nodes, 8,152 GPU-sharing pods (CC BY 4.0)"

    def __init__(self, path: str | Path | None = None, *, node_list: Literal["gpu", "all"] = "gpu",
                 nodes_path: str | Path | None = None, include_unscheduled: bool = True,
                 cluster: str = CLUSTER, **opts: object) -> None:  # fmt: skip
        super().__init__(path, **opts)  # type: ignore[arg-type]
        if not isinstance(include_unscheduled, bool):  # a --option value read as JSON: true or false
            raise ValueError(f"include_unscheduled must be true or false, not {include_unscheduled!r}")
        if node_list not in NODE_FILES:
            raise ValueError(f"node_list must be one of {sorted(NODE_FILES)}, not {node_list!r}")
        if self.path.is_dir():
            self.pods_path = self.path / POD_FILE
            base = self.path
        else:
            self.pods_path = self.path
            base = self.path.parent
        self.nodes_path = Path(nodes_path) if nodes_path is not None else base / NODE_FILES[node_list]
        self.include_unscheduled = include_unscheduled
        self.cluster = cluster

    @property
    def jobs_file(self) -> Path:
        return self.pods_path

    @classmethod
    def default_path(cls) -> Path:
        return traces_dir() / "alibaba-gpu-2023" / POD_FILE

    def _parse_nodes(self, jobs: list[TraceJob]) -> Iterator[NodeTelemetry]:
        seen: dict[str, int] = {}
        for line, row in self._rows(self.nodes_path, header=NODE_HEADER):
            try:
                sn = row[0].strip()
                if sn in seen:
                    raise ValueError(f"duplicate node {sn!r} (first at line {seen[sn]})")
                gpus = parse_int(row[3], "gpu")
                node = NodeTelemetry(
                    node_id=sn, cluster=self.cluster, source="inventory",
                    cpu_milli=parse_int(row[1], "cpu_milli"), memory_mib=parse_int(row[2], "memory_mib"),
                    num_gpu=gpus, gpu_model=row[4].strip() or None, topology={"trace": self.name},
                )  # fmt: skip
            except (ValueError, ValidationError) as e:
                self._bad_exc(self.nodes_path, line, e)
                continue
            seen[sn] = line
            yield node

    def _parse_jobs(self) -> Iterable[TraceJob]:
        seen: dict[str, int] = {}
        for line, row in self._rows(self.pods_path, header=POD_HEADER):
            try:
                job = self._pod(row, seen)
                if job is not None:
                    self._on_the_wire(job.event)
            except (ValueError, ValidationError) as e:
                self._bad_exc(self.pods_path, line, e)
                continue
            if job is None:
                continue
            seen[job.event.job_id] = line
            yield job

    def _pod(self, row: list[str], seen: dict[str, int]) -> TraceJob | None:
        name = row[0].strip()
        if name in seen:
            raise ValueError(f"duplicate pod {name!r} (first at line {seen[name]})")
        created = check_offset(parse_float(row[8], "creation_time"), "creation_time")  # type: ignore[arg-type]
        deleted = parse_float(row[9], "deletion_time", required=False)
        scheduled = parse_float(row[10], "scheduled_time", required=False)
        if scheduled is None and not self.include_unscheduled:
            self.stats.note("unscheduled_dropped")
            return None
        duration = None
        if scheduled is None or deleted is None:
            self.stats.note("duration_missing")
        elif deleted < scheduled:  # (as dlrm2025's; found by review: kept here, without a duration)
            raise ValueError(f"deletion_time {deleted:g} before scheduled_time {scheduled:g}")
        else:
            duration = deleted - scheduled
        num_gpu = parse_int(row[3], "num_gpu")
        share = parse_int(row[4], "gpu_milli")  # (found by review: a blank one was taken for 0, a whole GPU)
        if not 0 <= share <= 1000:
            raise ValueError(f"gpu_milli={share} outside 0..1000")
        gpu_milli = 0 if num_gpu == 0 else (share if 0 < share < 1000 else 1000)
        if num_gpu == 0 and share not in (0, 1000):
            raise ValueError(f"gpu_milli={share} on a pod with num_gpu=0")
        spec = row[5].strip()
        labels = {"trace": self.name}
        if row[7].strip():
            labels["pod_phase"] = row[7].strip()
        event = JobSubmitted(
            job_id=name, name=name, cluster=self.cluster, qos=_qos(row[6]),  # type: ignore[arg-type]
            cpu_milli=parse_int(row[1], "cpu_milli"), memory_mib=parse_int(row[2], "memory_mib"),
            num_gpu=num_gpu, gpu_milli=gpu_milli,
            gpu_models=[m.strip() for m in spec.split("|") if m.strip()] if spec else [],
            labels=labels, trace_duration_s=duration,
        )  # fmt: skip
        return TraceJob(offset_s=created, event=event, started_s=scheduled, ended_s=deleted)  # type: ignore[arg-type]


def _qos(value: str) -> str:
    """The pod's QoS class; a blank one is a bad line (found by review: it was taken for BE)."""
    if not value.strip():
        raise ValueError("qos is empty")
    return value.strip()
