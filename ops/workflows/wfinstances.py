"""Loader for WfCommons WfInstances (WfFormat 1.5 JSON) → a :class:`DagProblem` plus what
the recorded run measured.

Assumptions (the format records one real run, not a scheduling problem):

1. **Tasks and edges.** The tasks of ``workflow.specification.tasks``; an edge
   ``parent → child`` for every id in a task's ``parents`` and every id in its
   ``children`` (the union; each edge once).
2. **Runtimes.** ``workflow.execution.tasks[].runtimeInSeconds``, the measured wall time on
   the machine the task ran on. Every task needs one (>= 0). ``avgCPU`` (a task may use
   more than one core) is ignored: a task occupies one processor.
3. **Processors.** One processor per core of each machine in ``execution.machines``
   (``cpu.coreCount``; missing = 1), named ``<nodeName>#<core>``. ``machines=`` replaces
   the recorded machines (e.g. to study heterogeneity); ``max_cores_per_machine`` caps
   the cores taken from each.
4. **Speeds.** ``W[task, p] = runtime × speed(recorded machine of the task) / speed(p)``,
   with ``speed = cpu.speedInMHz``: runtimes scale inversely with the clock. A task that
   names no machine (``execution.tasks[].machines``), or one not listed, is referred to
   the mean known speed of the recorded machines (of the given ``machines=`` when no
   recorded speed is known); a machine without a speed gets that same mean (all 1 when
   no speed is known anywhere: runtimes are used as recorded).
5. **Communication.** The data volume of an edge is the summed ``sizeInBytes`` of the
   files the parent writes (``outputFiles``) and the child reads (``inputFiles``); an edge
   sharing no file carries 0 bytes. Cores of one machine share memory and the local disk:
   communication between them is free. Between machines it costs
   ``latency + bytes / bandwidth`` (default 125 MB/s, i.e. 1 Gbit/s Ethernet, and 0 s).
   All five shared instances ran on a single machine, so their default platform never
   pays for communication.
6. **The recorded makespan** ``execution.makespanInSeconds`` is kept beside the problem.
   It includes what the workflow system added (submission, staging, polling) and the
   concurrency it actually used, so it is not a bound the schedulers must respect; it is
   shown beside their makespans for scale.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ops.traces.base import open_text, undecodable
from ops.workflows.errors import WorkflowFormatError
from scheduling.dag import DagProblem, GraphError, Platform, TaskGraph

SUPPORTED_SCHEMA = "1.5"
MAX_CORES = 4096  # per machine: each core is a processor of the DAG problem (a million took all memory)
DEFAULT_BANDWIDTH = 125e6  # bytes per second between machines (1 Gbit/s)


@dataclass(frozen=True, slots=True)
class MachineSpec:
    name: str
    cores: int
    speed_mhz: float | None = None


@dataclass(frozen=True)
class WfInstance:
    problem: DagProblem
    name: str  # the file's stem
    recorded_makespan_s: float | None
    runtime_system: str
    machines: tuple[MachineSpec, ...]
    path: Path


def load_wfinstance(path: Path, *, machines: Sequence[MachineSpec] | None = None,
                    max_cores_per_machine: int | None = None, bandwidth: float = DEFAULT_BANDWIDTH,
                    latency: float = 0.0) -> WfInstance:  # fmt: skip
    path = Path(path)
    try:  # (as the trace loaders read: gzip and a byte-order mark taken, found by review: both refused here)
        with open_text(path) as fh:
            text = fh.read()
        if undecodable(text):
            raise WorkflowFormatError(path, "not JSON: invalid UTF-8")
        doc = json.loads(text)
    except (OSError, EOFError, zlib.error) as e:  # (a damaged .gz too)
        raise WorkflowFormatError(path, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    except json.JSONDecodeError as e:
        raise WorkflowFormatError(path, f"not JSON: {e}") from None
    except RecursionError:  # (found by review: a traceback)
        raise WorkflowFormatError(path, "not JSON this reader takes: nested too deeply") from None
    try:
        return _parse(doc, path, machines, max_cores_per_machine, bandwidth, latency)
    except WorkflowFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise WorkflowFormatError(path, f"malformed WfFormat document ({type(e).__name__}: {e})") from None


def _get(node: Any, path: Path, *keys: str) -> Any:
    for i, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            raise WorkflowFormatError(path, f"missing {'.'.join(keys[: i + 1])}")
        node = node[key]
    return node


def _parse(doc: Any, path: Path, override: Sequence[MachineSpec] | None, max_cores: int | None,
           bandwidth: float, latency: float) -> WfInstance:  # fmt: skip
    version = str(_get(doc, path, "schemaVersion"))
    if version != SUPPORTED_SCHEMA:
        raise WorkflowFormatError(path, f"WfFormat schemaVersion {version} is not supported ({SUPPORTED_SCHEMA} is)")
    spec_tasks = _get(doc, path, "workflow", "specification", "tasks")
    exec_tasks = _get(doc, path, "workflow", "execution", "tasks")
    if not isinstance(spec_tasks, list) or not spec_tasks:
        raise WorkflowFormatError(path, "workflow.specification.tasks is empty")
    ids = [str(_get(t, path, "id")) for t in spec_tasks]
    index = {tid: i for i, tid in enumerate(ids)}
    if len(index) != len(ids):
        dup = next(t for t in ids if ids.count(t) > 1)
        raise WorkflowFormatError(path, f"task id {dup!r} appears twice in workflow.specification.tasks")
    sizes = {str(f["id"]): f.get("sizeInBytes") for f in doc["workflow"]["specification"].get("files", [])}
    edges: dict[tuple[int, int], float] = {}
    for t in spec_tasks:
        me = str(t["id"])  # (ids are indexed as strings: an integer id links as its string)
        links = [(str(p), me) for p in t.get("parents", [])] + [(me, str(c)) for c in t.get("children", [])]
        for a, b in links:
            for x in (a, b):
                if x not in index:
                    raise WorkflowFormatError(path, f"task {me!r} links to unknown task {x!r}")
            edges.setdefault((index[a], index[b]), 0.0)
    outputs = {index[str(t["id"])]: set(t.get("outputFiles", [])) for t in spec_tasks}
    inputs = {index[str(t["id"])]: set(t.get("inputFiles", [])) for t in spec_tasks}
    for (a, b) in edges:
        shared = outputs[a] & inputs[b]
        for f in shared:
            if f not in sizes or not isinstance(sizes[f], (int, float)) or sizes[f] < 0:
                raise WorkflowFormatError(path, f"file {f!r} (from {ids[a]!r} to {ids[b]!r}) has no "
                                          "sizeInBytes >= 0 in workflow.specification.files")  # fmt: skip
        edges[(a, b)] = float(sum(sizes[f] for f in shared))
    runtime = np.full(len(ids), np.nan)
    ran_on: list[str | None] = [None] * len(ids)
    for t in exec_tasks:
        tid = str(_get(t, path, "id"))
        if tid not in index:
            raise WorkflowFormatError(path, f"workflow.execution.tasks names unknown task {tid!r}")
        if not np.isnan(runtime[index[tid]]):
            raise WorkflowFormatError(path, f"task {tid!r} appears twice in workflow.execution.tasks")
        r = t.get("runtimeInSeconds")
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not np.isfinite(r) or r < 0:
            raise WorkflowFormatError(path, f"task {tid!r} has no runtimeInSeconds >= 0 (got {r!r})")
        runtime[index[tid]] = float(r)
        on = t.get("machines")
        if on is not None and not (isinstance(on, list) and all(isinstance(m, str) for m in on)):
            # (found by review: a string was read as a list, its first letter taken for the machine's name)
            raise WorkflowFormatError(path, f"task {tid!r}: machines must be a list of machine names, not {on!r}")
        ran_on[index[tid]] = (on or [None])[0]
    if np.isnan(runtime).any():
        missing = ids[int(np.flatnonzero(np.isnan(runtime))[0])]
        raise WorkflowFormatError(path, f"task {missing!r} has no entry in workflow.execution.tasks")
    recorded = [_machine(m, path) for m in doc["workflow"]["execution"].get("machines", [])]
    if not recorded and override is None:
        raise WorkflowFormatError(path, "workflow.execution.machines is empty; pass machines= to load it")
    platform_machines = list(override) if override is not None else recorded
    if not platform_machines:
        raise WorkflowFormatError(path, "no machines to run on (machines= is empty)")
    if len({m.name for m in platform_machines}) != len(platform_machines):
        raise WorkflowFormatError(path, "two machines share a name")
    rec_known = [m.speed_mhz for m in recorded if m.speed_mhz is not None]
    new_known = [m.speed_mhz for m in platform_machines if m.speed_mhz is not None]
    base = float(np.mean(rec_known or new_known or [1.0]))
    recorded_speed = {m.name: m.speed_mhz or base for m in recorded}
    target = {m.name: m.speed_mhz or base for m in platform_machines}
    ref_speed = np.array([recorded_speed.get(m, base) if m else base for m in ran_on])
    proc_names, proc_speed, proc_machine = [], [], []
    for mi, m in enumerate(platform_machines):
        cores = m.cores if max_cores is None else min(m.cores, max_cores)
        for c in range(cores):
            proc_names.append(f"{m.name}#{c}")
            proc_speed.append(target[m.name])
            proc_machine.append(mi)
    costs = runtime[:, None] * ref_speed[:, None] / np.asarray(proc_speed)[None, :]
    same = np.equal.outer(proc_machine, proc_machine)
    bw = np.where(same, np.inf, bandwidth)
    lat = np.where(same, 0.0, latency)
    pairs = np.array(list(edges), dtype=np.int64).reshape(-1, 2)
    try:
        graph = TaskGraph(tuple(ids), pairs[:, 0], pairs[:, 1], np.array(list(edges.values())))
    except GraphError as e:
        raise WorkflowFormatError(path, str(e)) from None
    platform = Platform(tuple(proc_names), bw, lat)
    ms = doc["workflow"]["execution"].get("makespanInSeconds")
    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms < math.inf):
        raise WorkflowFormatError(path, f"execution.makespanInSeconds must be a number > 0, not {ms!r}")  # (review:
        # -5 was kept and shown as the recorded makespan)
    system = doc.get("runtimeSystem") or {}
    return WfInstance(problem=DagProblem(graph, platform, costs, name=path.stem), name=path.stem,
                      recorded_makespan_s=float(ms) if isinstance(ms, (int, float)) else None,
                      runtime_system=f"{system.get('name', '?')} {system.get('version', '')}".strip(),
                      machines=tuple(platform_machines), path=path)  # fmt: skip


def _machine(m: Any, path: Path) -> MachineSpec:
    name = str(_get(m, path, "nodeName"))
    cpu = m.get("cpu") or {}
    cores = cpu.get("coreCount", 1)
    if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= MAX_CORES:
        raise WorkflowFormatError(path, f"machine {name!r} has coreCount {cores!r} (need an integer 1 .. {MAX_CORES})")
    speed = cpu.get("speedInMHz")
    if speed is not None and (isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 < speed < math.inf):
        raise WorkflowFormatError(path, f"machine {name!r} has speedInMHz {speed!r} (need > 0)")
    return MachineSpec(name, cores, float(speed) if speed is not None else None)
