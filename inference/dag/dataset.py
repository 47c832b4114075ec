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

from inference.dag.features import PROC_FEATURES, STATIC_FEATURES, TASK_DYNAMIC
from inference.dag.teacher import Sample, teacher_trajectory
from scheduling.dag import DagGeneratorConfig, training_dags
from scheduling.dag.schedulers import get_dag_scheduler

#: bumped when the teacher changes, so old caches are not reused (the features are in the key by their names)
TEACHER_VERSION = 3
#: the feature layout the samples were made with: part of the cache key, so a cache from another layout is
#: relabelled, never reused (found by review: a bump of TEACHER_VERSION was forgotten with a new feature set,
#: and an old cache's narrower processor features crashed imitation, or would be trained on silently)
FEATURE_LAYOUT = (STATIC_FEATURES, TASK_DYNAMIC, PROC_FEATURES)


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
    (the cache is only reused for the same ``n_dags``, ``seed``, ``k``, generator config and features)."""
    key = (TEACHER_VERSION, FEATURE_LAYOUT, n_dags, seed, k, repr(config))
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
