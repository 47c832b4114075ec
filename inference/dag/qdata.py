"""Processor Q-values for the learned DAG policy: at each state of a trajectory, the makespan
of finishing the DAG with HEFT after placing the step's task on *each* processor.

Measured on training DAGs (seed 11, 10 DAGs): a rollout teacher that takes HEFT's own task
(the ready task of highest upward rank) and tries every processor reaches 0.942 × HEFT's
makespan; trying the 3 top-rank tasks as well reaches 0.939 at 2.4× the cost. The gain is
in the processor choice, so this data set labels every processor of HEFT's task with its
HEFT-completion makespan (a graded target, not one winning processor), and the student
learns to rank processors by it.

A trajectory is stored as the actions taken plus the per-step completion makespans, not as
features, so the features can change without re-running the rollouts (replay the actions
through :class:`~scheduling.dag.ListSchedulingEnv` and featurise each state). Trajectories
follow the teacher (argmin of the completions, ties to HEFT's earliest-finish processor: the completion of
HEFT's own action is the HEFT completion of the state, so the teacher never gets worse),
with probability ``explore`` a random other processor, or a given student policy (DAgger).
Only *training* DAGs (``generate_dag(config, (seed, TRAIN, k))``) are used.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from scheduling.dag import DagGeneratorConfig, DagProblem, ListSchedulingEnv, generate_dag
from scheduling.dag.generator import TRAIN, check_stream_seed
from scheduling.dag.ranks import heft_upward_ranks
from scheduling.dag.rollout import heft_candidates, heft_complete

#: a student for DAgger: (env, task, spans) -> processor
Student = Callable[[ListSchedulingEnv, int], int]


@dataclass(frozen=True)
class QTrajectory:
    seed: int
    index: int  # the DAG is generate_dag(config, (seed, TRAIN, index))
    tasks: np.ndarray  # (n,) the task placed at each step (HEFT's top-rank ready task)
    procs: np.ndarray  # (n,) the processor it went to
    spans: np.ndarray  # (n, P) HEFT-completion makespan of placing the step's task on each processor
    heft: float  # HEFT's makespan of the DAG
    makespan: float  # the trajectory's makespan

    def problem(self, config: DagGeneratorConfig) -> DagProblem:
        return training_problem(config, self.seed, self.index)


def training_problem(config: DagGeneratorConfig, seed: int, index: int) -> DagProblem:
    """The ``index``-th DAG of ``training_dags(config, …, seed)`` (``seed`` one 32-bit word: a larger one
    could name a held-out DAG; found by review)."""
    check_stream_seed(seed)
    return generate_dag(config, (seed, TRAIN, index), name=f"train-{seed}-{index}")


def completion_spans(env: ListSchedulingEnv, task: int, rank: np.ndarray) -> np.ndarray:
    """(P,) the HEFT-completion makespan of placing ``task`` on each processor."""
    spans = np.empty(env.problem.n_procs)
    for proc in range(env.problem.n_procs):
        twin = env.clone()
        twin.step(task, proc)
        spans[proc] = heft_complete(twin, rank)
    return spans


def q_trajectory(config: DagGeneratorConfig, seed: int, index: int, *, explore: float = 0.0,
                 rng: np.random.Generator | None = None, student: Student | None = None) -> QTrajectory:  # fmt: skip
    """One trajectory on a training DAG with every step's processor Q-values."""
    problem = training_problem(config, seed, index)
    rank = heft_upward_ranks(problem)
    env = ListSchedulingEnv(problem, insertion=True)
    heft = heft_complete(env.clone(), rank)
    tol = 1e-9 * max(heft, 1.0)
    rng = rng or np.random.default_rng((seed, index))
    tasks, procs, spans = [], [], []
    while not env.done:
        task, eft_proc = heft_candidates(env, rank)[0]  # HEFT's action, its near-ties broken as heft_complete's
        q = completion_spans(env, task, rank)
        if student is not None:
            proc = student(env, task)
        elif explore and rng.random() < explore and len(q) > 1:
            proc = int(rng.choice(np.delete(np.arange(len(q)), int(np.argmin(q)))))
        else:  # q[eft_proc] is the HEFT completion of the state, so the teacher never gets worse
            proc = int(np.argmin(q)) if q.min() < q[eft_proc] - tol else eft_proc
        tasks.append(task)
        procs.append(proc)
        spans.append(q)
        env.step(task, proc)
    return QTrajectory(seed, index, np.array(tasks), np.array(procs), np.stack(spans), heft, env.makespan)


#: bumped when the teacher's labels (its processor choice, its tie-breaks) change: a cache of older labels is
#: made again, not reused (found by review: the key was the generator config alone, as dataset.py's once was)
Q_TEACHER_VERSION = 2


def _key(config: DagGeneratorConfig) -> str:
    return f"q-teacher {Q_TEACHER_VERSION}; {config!r}"


def save_trajectories(path: Path, trajs: list[QTrajectory], config: DagGeneratorConfig) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump((_key(config), [asdict(t) for t in trajs]), f)  # plain dicts: no class path in the file
    tmp.replace(path)


def load_trajectories(path: Path, config: DagGeneratorConfig) -> list[QTrajectory]:
    with path.open("rb") as f:
        stored, trajs = _Unpickler(f).load()
    if stored != _key(config):
        raise ValueError(f"{path} was made with another generator config or teacher: {stored}")
    return [t if isinstance(t, QTrajectory) else QTrajectory(**t) for t in trajs]


class _Unpickler(pickle.Unpickler):
    """Reads files written when this module ran as ``__main__``."""

    def find_class(self, module: str, name: str) -> object:
        return QTrajectory if name == "QTrajectory" else super().find_class(module, name)


def main(out: Path, seed: int = 0, start: int = 0, dags: int = 100, explore: float = 0.1) -> None:
    """Generate ``dags`` teacher trajectories (training DAGs ``start …``) to ``out``, saving as it goes."""
    import time

    config = DagGeneratorConfig()
    trajs: list[QTrajectory] = []
    t0 = time.perf_counter()
    for i in range(start, start + dags):
        trajs.append(q_trajectory(config, seed, i, explore=explore))
        if len(trajs) % 10 == 0 or i == start + dags - 1:
            save_trajectories(out, trajs, config)
            ratio = np.mean([t.makespan / t.heft for t in trajs])
            print(f"{len(trajs)} DAGs, trajectory/HEFT {ratio:.4f}, {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    import typer

    typer.run(main)
