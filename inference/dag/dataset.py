"""The imitation data set: the rollout teacher's decisions on generated *training* DAGs
(``scheduling.dag.training_dags`` — never the held-out stream), cached on disk because the
teacher takes seconds per DAG."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from inference.dag.teacher import Sample, teacher_trajectory
from scheduling.dag import DagGeneratorConfig, training_dags
from scheduling.dag.schedulers import get_dag_scheduler

#: bumped when the teacher or the features change, so old caches are not reused
TEACHER_VERSION = 3


@dataclass(frozen=True)
class TeacherData:
    samples: list[Sample]
    teacher_vs_heft: list[float]  # per DAG: teacher makespan / HEFT makespan
    n_dags: int
    seed: int
    k: int


def progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"))  # fmt: skip


def build_teacher_data(config: DagGeneratorConfig, n_dags: int, seed: int = 0, k: int = 3,
                       cache: Path | None = None) -> TeacherData:  # fmt: skip
    """Teacher decisions on ``n_dags`` training DAGs; read from / written to ``cache`` when given
    (the cache is only reused for the same ``n_dags``, ``seed``, ``k`` and generator config)."""
    key = (TEACHER_VERSION, n_dags, seed, k, repr(config))
    if cache is not None and cache.exists():
        with cache.open("rb") as f:
            stored_key, data = pickle.load(f)
        if stored_key == key:
            return data
    samples: list[Sample] = []
    ratios: list[float] = []
    with progress() as bar:
        job = bar.add_task("teacher rollouts", total=n_dags, info="")
        for problem in training_dags(config, n_dags, seed):
            heft = get_dag_scheduler("heft").schedule(problem).makespan
            traj, span = teacher_trajectory(problem, k)
            samples += traj
            ratios.append(span / heft)
            bar.update(job, advance=1, info=f"teacher/HEFT mean {sum(ratios) / len(ratios):.3f}")
    data = TeacherData(samples, ratios, n_dags, seed, k)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as f:
            pickle.dump((key, data), f)
    return data
