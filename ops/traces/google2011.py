"""Google cluster-usage traces v2 (2011; CC BY 4.0) → canonical events.

Files (``traces/google-2011/``, gzip CSV without header):

- ``task_events-part-*.csv.gz``: ``time_us,missing_info,job_id,task_index,machine_id,
  event_type,user,scheduling_class,priority,cpu_request,memory_request,disk_request,
  different_machines_restriction``.
- ``job_events-part-*.csv.gz`` (found next to it by name, or ``job_events_path=``):
  ``time_us,missing_info,job_id,event_type,user,scheduling_class,job_name,logical_job_name``.

Mapping decisions:

- One :class:`JobSubmitted` per task, at the task's **first** SUBMIT (event type 0) in
  the file: ``job_id = "<job_id>-<task_index>"``, ``offset_s = time_us / 1e6`` (trace
  time, so a part file starts late; replay paces relative to the first job). Later
  SUBMITs of the same task (re-submissions after EVICT/FAIL/KILL) are counted
  (``resubmits_ignored``), not emitted. Tasks whose SUBMIT lies in an earlier part file
  (only SCHEDULE, FINISH, KILL… seen here) are counted as ``tasks_without_submit``.
- Requests are normalised to the largest machine; they are scaled by the documented
  machine shape :data:`LARGEST_MACHINE` (32 cores, 64 GiB — an assumption: Google did
  not publish absolute sizes; override with ``machine_cpu_milli`` /
  ``machine_memory_mib``): ``cpu_milli = round(cpu_request × 32000)``, ``memory_mib =
  round(memory_request × 65536)``. An empty request on a SUBMIT (the schema allows it)
  becomes 0 and label ``request_missing``.
- ``priority`` = the trace priority (0..11); ``qos`` = ``LS`` for scheduling classes 2–3
  (latency-sensitive) and ``BE`` for 0–1; ``user`` = ``tenant`` = the (hashed) user.
- ``different_machines_restriction = 1`` → ``app = <job_id>``,
  ``max_instances_per_node = 1`` (tasks of the job on distinct machines); every task
  carries ``app = <job_id>``.
- ``name`` = the job's ``logical_job_name`` (the same program → the same name: what a
  semantic encoder should see), labels ``job_name`` / ``logical_job_name`` /
  ``scheduling_class`` / ``job_id`` / ``task_index``; jobs absent from the job-events file
  are counted as ``jobs_without_name``.
- ``trace_duration_s`` = the task's first SCHEDULE (type 1) to the first FINISH (type 4)
  after it, when both are in the file; else None (a task that was evicted and
  rescheduled before finishing counts its downtime).
- Nodes: every ``machine_id`` seen in the task events (sorted numerically), all at the
  documented shape, ``source="inventory"``, cluster ``google2011``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from ops.traces.base import TraceJob, TraceLoader, check_offset, parse_float, parse_int
from ops.traces.paths import traces_dir
from scheduling.events import MAX_CPU_MILLI, MAX_MEMORY_MIB, JobSubmitted, NodeTelemetry

TASK_FIELDS = 13
JOB_FIELDS = 8
SUBMIT, SCHEDULE, FINISH = 0, 1, 4
ENDS = (2, 6)  # EVICT, FAIL, FINISH, KILL, LOST: a run ends
NEVER = 2**63 - 1  # the trace's "after the end of the trace" timestamp
LARGEST_MACHINE = {"cpu_milli": 32_000, "memory_mib": 64 * 1024}
TASK_FILE = "task_events-part-00001-of-00500.csv.gz"
CLUSTER = "google2011"


class Google2011Loader(TraceLoader):
    """``Google2011Loader(path=None, job_events_path=None, machine_cpu_milli=32000,
    machine_memory_mib=65536, cluster="google2011", **selection)``."""

    name = "google2011"
    summary = (
        "Google cluster data 2011, one task_events part: one job per task; synthesised machines (CC BY 4.0)"
    )

    def __init__(self, path: str | Path | None = None, *, job_events_path: str | Path | None = None,
                 machine_cpu_milli: int = LARGEST_MACHINE["cpu_milli"],
                 machine_memory_mib: int = LARGEST_MACHINE["memory_mib"],
                 cluster: str = CLUSTER, **opts: object) -> None:  # fmt: skip
        super().__init__(path, **opts)  # type: ignore[arg-type]
        self.task_path = self.path / TASK_FILE if self.path.is_dir() else self.path
        # the job_events part beside it, by the dataset's naming; a task file named otherwise has none
        # (found by review: its own path was read as the job events, every line of it "bad")
        beside = self.task_path.name.replace("task_events", "job_events")
        self.job_path: Path | None = (
            Path(job_events_path) if job_events_path is not None
            else self.task_path.with_name(beside) if beside != self.task_path.name else None
        )  # fmt: skip
        self._job_path_given = job_events_path is not None
        for option, value, most in (("machine_cpu_milli", machine_cpu_milli, MAX_CPU_MILLI),
                                    ("machine_memory_mib", machine_memory_mib, MAX_MEMORY_MIB)):  # (-o values are JSON)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ValueError(f"{option} must be a whole number from 1 to {most:,}, not {value!r}")
        self.machine_cpu_milli = machine_cpu_milli
        self.machine_memory_mib = machine_memory_mib
        self.cluster = cluster
        self.machines: set[int] = set()

    @property
    def jobs_file(self) -> Path:
        return self.task_path

    @classmethod
    def default_path(cls) -> Path:
        return traces_dir() / "google-2011" / TASK_FILE

    def _parse_nodes(self, jobs: list[TraceJob]) -> Iterator[NodeTelemetry]:
        for m in sorted(self.machines):
            yield NodeTelemetry(node_id=str(m), cluster=self.cluster, source="inventory",
                                cpu_milli=self.machine_cpu_milli, memory_mib=self.machine_memory_mib,
                                topology={"trace": self.name, "synthesized": "true"})  # fmt: skip

    def _job_names(self) -> dict[int, tuple[str, str, str]]:
        """job_id → (user, job_name, logical_job_name), from the first event of each job."""
        names: dict[int, tuple[str, str, str]] = {}
        if self.job_path is None or (not self.job_path.exists() and not self._job_path_given):
            self.stats.note("job_events_file_missing")
            return names
        for line, row in self._rows(self.job_path, header=None):
            try:
                if len(row) != JOB_FIELDS:
                    raise ValueError(f"expected {JOB_FIELDS} fields, got {len(row)}")
                job = parse_int(row[2], "job_id")
            except ValueError as e:
                self._bad_exc(self.job_path, line, e)
                continue
            names.setdefault(job, (row[4].strip(), row[6].strip(), row[7].strip()))  # type: ignore[arg-type]
        return names

    def _parse_jobs(self) -> Iterable[TraceJob]:
        submits: dict[tuple[int, int], tuple[int, int, list[str]]] = {}  # key -> (line, time, row)
        scheduled: dict[tuple[int, int], int] = {}
        finished: dict[tuple[int, int], int] = {}
        ended: dict[tuple[int, int], int] = {}  # the first EVICT, FAIL, FINISH, KILL or LOST after the schedule
        seen: set[tuple[int, int]] = set()  # every task with an event in the file
        refused_submits: set[tuple[int, int]] = set()  # tasks whose first SUBMIT was a bad line
        for line, row in self._rows(self.task_path, header=None):
            try:
                if len(row) != TASK_FIELDS:
                    raise ValueError(f"expected {TASK_FIELDS} fields, got {len(row)}")
                t = parse_int(row[0], "time_us")
                key = (parse_int(row[2], "job_id"), parse_int(row[3], "task_index"))
                etype = parse_int(row[5], "event_type")
                if not 0 <= etype <= 8:  # type: ignore[operator]
                    raise ValueError(f"event_type {etype} outside 0..8")
                if t != NEVER:  # (found by review: a negative time became 0, uncounted)
                    check_offset(t / 1e6, "time_us / 1e6")  # type: ignore[operator]
                elif etype == SUBMIT:  # (found by review: submitted "after the trace's end", at 9.2e12 s)
                    raise ValueError("a SUBMIT at the after-the-end-of-the-trace time (2**63 - 1)")
                machine = parse_int(row[4], "machine_id", required=False)
            except ValueError as e:
                self._bad_exc(self.task_path, line, e)
                continue
            try:
                _check_task_row(row)
            except ValueError as e:
                self._bad_exc(self.task_path, line, e)
                if etype == SUBMIT and key not in submits:  # its first SUBMIT: not taken from a later one (review)
                    refused_submits.add(key)  # type: ignore[arg-type]
                continue
            if machine is not None:
                self.machines.add(machine)
            seen.add(key)  # type: ignore[arg-type]
            if etype == SUBMIT:
                if key in submits or key in refused_submits:
                    self.stats.note("resubmits_ignored")
                else:
                    submits[key] = (line, t, row)  # type: ignore[assignment]
            elif etype == SCHEDULE and key in submits:  # (a run before the task's first submit here is an
                scheduled.setdefault(key, t)  # type: ignore[arg-type]  # earlier one's: found by review)
            elif etype == FINISH and key in scheduled and key not in finished and t != NEVER:
                finished[key] = t  # type: ignore[assignment]
            if ENDS[0] <= etype <= ENDS[1] and key in scheduled and key not in ended and t != NEVER:  # type: ignore[operator]
                ended[key] = t  # type: ignore[assignment]
        orphans = seen - set(submits)  # (any event: a FINISH or KILL alone too; found by review, ~12x undercount)
        if orphans:
            self.stats.note("tasks_without_submit", len(orphans))
        names = self._job_names()
        missing_names: set[int] = set()
        for key, (line, t, row) in submits.items():
            try:
                job = replace(self._task(key, t, row, scheduled.get(key), finished.get(key), names, missing_names),
                              started_s=None if scheduled.get(key, NEVER) == NEVER else max(scheduled[key], 0) / 1e6,
                              ended_s=ended[key] / 1e6 if key in ended else None)  # fmt: skip
                self._on_the_wire(job.event)
            except (ValueError, ValidationError) as e:
                self._bad_exc(self.task_path, line, e)
                continue
            yield job
        if missing_names:
            self.stats.note("jobs_without_name", len(missing_names))

    def _task(self, key: tuple[int, int], t: int, row: list[str], sched: int | None, fin: int | None,
              names: dict[int, tuple[str, str, str]], missing_names: set[int]) -> TraceJob:  # fmt: skip
        job, task = key
        cls_ = parse_int(row[7], "scheduling_class", required=False)
        prio = parse_int(row[8], "priority", required=False)
        cpu = parse_float(row[9], "cpu_request", required=False)
        mem = parse_float(row[10], "memory_request", required=False)
        dmr = parse_int(row[12], "different_machines_restriction", required=False)
        user = row[6].strip()
        labels = {"trace": self.name, "job_id": str(job), "task_index": str(task)}
        if cls_ is not None:
            labels["scheduling_class"] = str(cls_)
        if cpu is None or mem is None:
            labels["request_missing"] = ",".join(w for w, v in (("cpu", cpu), ("memory", mem)) if v is None)
        name = ""
        if job in names:
            _, job_name, logical = names[job]
            labels["job_name"], labels["logical_job_name"] = job_name, logical
            name = logical or job_name
        else:
            missing_names.add(job)
        duration = None
        if sched is not None and fin is not None and fin >= sched and sched != NEVER:
            duration = (fin - sched) / 1e6
        event = JobSubmitted(
            job_id=f"{job}-{task}", cluster=self.cluster, tenant=user or "default", user=user,
            priority=prio or 0, qos="LS" if (cls_ or 0) >= 2 else "BE",
            cpu_milli=round((cpu or 0.0) * self.machine_cpu_milli),
            memory_mib=round((mem or 0.0) * self.machine_memory_mib),
            app=str(job), max_instances_per_node=1 if dmr == 1 else None,
            name=name, labels=labels, trace_duration_s=duration,
        )  # fmt: skip
        return TraceJob(offset_s=max(t, 0) / 1e6, event=event)


def _check_task_row(row: list[str]) -> None:
    """The rest of a task-event row against the schema, whatever its event type (found by review: a SCHEDULE row,
    which sets a task's start, and a repeated SUBMIT were read for their time alone, so a row of garbage passed;
    a scheduling class of 9 was taken for LS). Empty optional fields pass."""
    parse_int(row[1], "missing_info", required=False)
    for k, what, hi in ((7, "scheduling_class", 3), (8, "priority", 11), (12, "different_machines_restriction", 1)):
        v = parse_int(row[k], what, required=False)
        if v is not None and not 0 <= v <= hi:
            raise ValueError(f"{what} {v} outside 0..{hi}")
    for k, what in ((9, "cpu_request"), (10, "memory_request"), (11, "disk_request")):
        f = parse_float(row[k], what, required=False)
        if f is not None and not 0 <= f <= 1:
            raise ValueError(f"{what}={f} outside the normalised range 0..1")
