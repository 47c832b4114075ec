"""Job-level metrics from job outcomes (the simulator's records or the archive's events).

Definitions (the archive's SQL in ``storage/queries`` computes the same ones):

- **JCT** (job completion time) = finish − submit, over jobs that finished.
- **Queueing delay** = first start − submit, over jobs that started (the time a job
  waited before it first ran; with re-queues, later waits are in the JCT, not here).
- **Makespan** = last finish − first submit, over the run's jobs.
- **Throughput** = jobs finished / makespan (jobs per second); **placement rate** =
  placements / makespan; neither when the makespan is not positive.
- Censored jobs (still pending or running at the end) and rejected jobs are counted, not
  averaged in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from scheduling.metrics.distribution import Distribution

JobState = Literal["finished", "failed", "rejected", "running", "pending"]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One job's life in a run: times in seconds on any one clock."""

    job_id: str
    submit: float
    state: JobState
    start: float | None = None  # first start
    finish: float | None = None  # final end (finished / failed)
    placements: int = 0  # how many times it was placed (re-queues add more)
    gpu_milli: int = 0  # GPU demand (num_gpu × per-GPU milli)
    tenant: str = "default"

    @property
    def jct(self) -> float | None:
        return self.finish - self.submit if self.state == "finished" and self.finish is not None else None

    @property
    def queueing_delay(self) -> float | None:
        return self.start - self.submit if self.start is not None else None


@dataclass(frozen=True, slots=True)
class JobMetrics:
    jobs: int
    finished: int
    rejected: int
    unfinished: int  # still pending or running at the end
    jct: Distribution
    queueing_delay: Distribution
    makespan_s: float | None
    throughput_jobs_per_s: float | None
    placement_rate_per_s: float | None

    def as_row(self) -> dict[str, float | int | None]:
        return {
            "jobs": self.jobs, "finished": self.finished, "rejected": self.rejected,
            "unfinished": self.unfinished,
            **self.jct.as_dict("jct_"), **self.queueing_delay.as_dict("queue_"),
            "makespan_s": self.makespan_s, "throughput_jobs_per_s": self.throughput_jobs_per_s,
            "placement_rate_per_s": self.placement_rate_per_s,
        }  # fmt: skip


def job_metrics(outcomes: Sequence[JobOutcome]) -> JobMetrics:
    jcts = [j for o in outcomes if (j := o.jct) is not None]
    waits = [w for o in outcomes if (w := o.queueing_delay) is not None]
    finishes = [o.finish for o in outcomes if o.state == "finished" and o.finish is not None]
    makespan = (max(finishes) - min(o.submit for o in outcomes)) if finishes else None
    placements = sum(o.placements for o in outcomes)
    # none over a makespan that is not positive (a finish stamped before the submissions: clocks apart), as
    # the archive's SQL (found by review: a negative one gave a negative throughput here)
    rate = (lambda n: n / makespan) if makespan is not None and makespan > 0 else (lambda n: None)  # noqa: E731
    return JobMetrics(
        jobs=len(outcomes),
        finished=len(jcts),
        rejected=sum(o.state == "rejected" for o in outcomes),
        unfinished=sum(o.state in ("pending", "running") for o in outcomes),
        jct=Distribution.of(jcts),
        queueing_delay=Distribution.of(waits),
        makespan_s=makespan,
        throughput_jobs_per_s=rate(len(jcts)),
        placement_rate_per_s=rate(placements),
    )
