"""``JobRequest``: the scheduler's immutable view of one pending job.

Built from a :class:`~scheduling.events.JobSubmitted` event (or directly, in the
simulator and tests). Times are plain float seconds so the same code runs on wall-clock
time in the worker and on virtual time in the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.events import MAX_TEXT, JobSubmitted
from scheduling.resources import FULL_GPU_MILLI, Resources, format_resources, normalise_per_gpu_milli

#: the submission label (and node topology key) of the node pool a job may run in (the node-pool filter)
POOL_LABEL = "pool"


@dataclass(frozen=True, slots=True)
class JobRequest:
    """One job to place. ``per_gpu_milli`` is normalised: 0 without GPUs, else 1..1000."""

    job_id: str
    cluster: str = "default"
    tenant: str = "default"
    priority: int = 0
    qos: str = "BE"
    cpu_milli: int = 0
    memory_mib: int = 0
    num_gpu: int = 0
    per_gpu_milli: int = 0
    gpu_models: frozenset[str] = field(default_factory=frozenset)
    gang_id: str | None = None
    gang_size: int = 1
    app: str | None = None
    max_instances_per_node: int | None = None
    submit_time: float = 0.0
    attempt: int = 0
    runtime_estimate_s: float | None = None
    trace_duration_s: float | None = None
    user: str = ""
    text: str = ""  # the submission's free text (name, command, app, labels): what a semantic encoder reads
    node_pool: str | None = None  # the pool whose nodes alone it may run on (labels["pool"]; scheduling/filters/node_pool.py)

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0:
            raise ValueError(f"job {self.job_id}: negative resources")
        if not 0 <= self.per_gpu_milli <= FULL_GPU_MILLI:
            raise ValueError(f"job {self.job_id}: per_gpu_milli must be within 0..{FULL_GPU_MILLI} (0: whole GPUs)")
        if self.num_gpu > 1 and 0 < self.per_gpu_milli < FULL_GPU_MILLI:  # as the wire (JobSubmitted) says
            raise ValueError(f"job {self.job_id}: a fractional per_gpu_milli is only allowed with num_gpu == 1 "
                             f"(FGD and the GPU selection have no rule for sharing several GPUs)")
        if self.gang_size < 1:
            raise ValueError(f"job {self.job_id}: gang_size must be >= 1")
        if self.max_instances_per_node is not None and self.max_instances_per_node < 1:
            raise ValueError(f"job {self.job_id}: max_instances_per_node must be >= 1")
        object.__setattr__(self, "per_gpu_milli", normalise_per_gpu_milli(self.num_gpu, self.per_gpu_milli))
        if not isinstance(self.gpu_models, frozenset):
            object.__setattr__(self, "gpu_models", frozenset(self.gpu_models))

    @classmethod
    def from_event(cls, event: JobSubmitted, submit_time: float | None = None) -> JobRequest:
        """The request of a submission; ``submit_time`` defaults to the event time (epoch s)."""
        return cls(
            job_id=event.job_id,
            cluster=event.cluster,
            tenant=event.tenant,
            priority=event.priority,
            qos=event.qos,
            cpu_milli=event.cpu_milli,
            memory_mib=event.memory_mib,
            num_gpu=event.num_gpu,
            per_gpu_milli=event.per_gpu_milli,
            gpu_models=frozenset(event.gpu_models),
            gang_id=event.gang_id,
            gang_size=event.gang_size,
            app=event.app,
            max_instances_per_node=event.max_instances_per_node,
            submit_time=event.event_time.timestamp() if submit_time is None else float(submit_time),
            runtime_estimate_s=event.runtime_estimate_s,
            trace_duration_s=event.trace_duration_s,
            user=event.user,
            text=job_text(event),
            node_pool=event.labels.get(POOL_LABEL) or None,
        )

    @property
    def resources(self) -> Resources:
        return Resources(self.cpu_milli, self.memory_mib, self.num_gpu, self.per_gpu_milli)

    @property
    def gpu_demand_milli(self) -> int:
        return self.num_gpu * self.per_gpu_milli

    @property
    def is_gang(self) -> bool:
        return self.gang_id is not None and self.gang_size > 1

    def describe(self) -> str:
        return format_resources(self.cpu_milli, self.memory_mib, self.num_gpu, self.per_gpu_milli)


#: the most characters of a job's text the encoders see: its name and command (each at most ``MAX_TEXT``)
#: and 4 KiB of its app and labels. Labels are not bounded on the wire, and a submission's text could
#: run to ~250,000 characters, a quarter second of a step in one encode (found by review).
MAX_JOB_TEXT = 3 * MAX_TEXT


def job_text(event: JobSubmitted) -> str:
    """One line of the submission's free text, fields in a fixed order (empty ones left out):
    ``name``, ``command``, ``app``, then ``key=value`` labels sorted by key; its first
    :data:`MAX_JOB_TEXT` characters."""
    parts = [event.name, event.command, event.app or ""]
    parts += [f"{k}={v}" for k, v in sorted(event.labels.items())]
    return " | ".join(p for p in parts if p)[:MAX_JOB_TEXT]
