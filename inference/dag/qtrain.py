"""Train the two-stage DAG policy on processor Q-values (:mod:`inference.dag.qdata`).

Stage one imitates the rollout teacher's task (HEFT's top-rank ready task). Stage two learns
to *rank* the processors by their HEFT-completion makespan: the target is the soft-min
``softmax(-(span_q - min span) / (tau × HEFT makespan))`` (KL divergence), so a processor
that loses 0.1 % is almost as right as the best one and one that loses 5 % is plainly wrong —
much more signal than the single winning processor. DAgger rounds then label the states
the student itself reaches (the student picks the processors, the rollouts label them).
Only training DAGs; validation on another training seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import typer
from torch import nn

from inference.dag.dataset import progress
from inference.dag.features import dag_context, proc_features, task_view
from inference.dag.model import DagPolicyNet, NetConfig, save_model
from inference.dag.policy import NetPolicy
from inference.dag.qdata import QTrajectory, load_trajectories, q_trajectory, save_trajectories
from inference.dag.train import (
    MODELS,
    VALIDATION_SEED_OFFSET,
    _pad,
    check_seed,
    greedy_ratio,
    heft_makespan,
    next_version,
)
from inference.model.io import check_latest, point_latest
from scheduling.dag import DagGeneratorConfig, ListSchedulingEnv, training_dags


@dataclass(frozen=True)
class QSample:
    x_task: np.ndarray  # (R, TASK_DIM)
    task: int  # row of the step's task
    x_proc: np.ndarray  # (P, PROC_DIM)
    regret: np.ndarray  # (P,) (span_q - min span) / HEFT makespan


def featurise(traj: QTrajectory, config: DagGeneratorConfig) -> list[QSample]:
    """Replay ``traj`` and featurise every state (the features of the current code)."""
    problem = traj.problem(config)
    ctx = dag_context(problem)
    env = ListSchedulingEnv(problem, insertion=True)
    out = []
    for task, proc, spans in zip(traj.tasks, traj.procs, traj.spans, strict=True):
        view = task_view(ctx, env)
        row = int(np.flatnonzero(view.ready == task)[0])
        regret = (spans - spans.min()) / traj.heft
        out.append(QSample(view.x, row, proc_features(ctx, env, view, row), regret.astype(np.float32)))
        env.step(int(task), int(proc))
    return out


def q_loss(net: DagPolicyNet, batch: list[QSample], tau: float) -> torch.Tensor:
    xt, mt = _pad([s.x_task for s in batch])
    xp, mp = _pad([s.x_proc[:, : net.config.proc_dim] for s in batch])
    task = torch.tensor([s.task for s in batch])
    logits, emb = net.task_logits(xt, mt)
    proc_logits = net.proc_logits(xp, emb[torch.arange(len(batch)), task], mp)
    regret = torch.from_numpy(np.stack([s.regret for s in batch]))
    target = torch.softmax(-regret / tau, dim=-1)
    proc_ce = -(target * torch.log_softmax(proc_logits, dim=-1)).sum(-1).mean()
    return nn.functional.cross_entropy(logits, task) + proc_ce


def train_q(net: DagPolicyNet, data: list[QSample], *, epochs: int, seed: int, tau: float = 0.005,
            batch_size: int = 256, lr: float = 2e-3, show: bool = True) -> list[float]:  # fmt: skip
    """Epoch mean losses (Adam, cosine-decayed learning rate)."""
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    steps = epochs * max(1, -(-len(data) // batch_size))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    rng = np.random.default_rng(seed)
    losses = []
    net.train()
    with progress() as bar:
        job = bar.add_task("q imitation", total=epochs, info="", visible=show)
        for _ in range(epochs):
            order = rng.permutation(len(data))
            total = 0.0
            for lo in range(0, len(order), batch_size):
                batch = [data[i] for i in order[lo:lo + batch_size]]
                loss = q_loss(net, batch, tau)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                total += loss.item() * len(batch)
            losses.append(total / max(1, len(data)))
            bar.update(job, advance=1, info=f"loss {losses[-1]:.4f}")
    net.eval()
    return losses


def student_of(net: DagPolicyNet, config: DagGeneratorConfig, seed: int, index: int):  # noqa: ANN201
    """The student's processor choice for a given task, for DAgger trajectories."""
    from inference.dag.qdata import training_problem

    ctx = dag_context(training_problem(config, seed, index))
    policy = NetPolicy(net, ctx)

    def choose(env: ListSchedulingEnv, task: int) -> int:
        with torch.no_grad():
            return policy.processor_for(env, task)

    return choose


def dagger_trajectories(net: DagPolicyNet, config: DagGeneratorConfig, seed: int, indices: range,
                        show: bool = True) -> list[QTrajectory]:  # fmt: skip
    out = []
    with progress() as bar:
        job = bar.add_task("dagger rollouts", total=len(indices), info="", visible=show)
        for i in indices:
            out.append(q_trajectory(config, seed, i, student=student_of(net, config, seed, i)))
            ratio = np.mean([t.makespan / t.heft for t in out])
            bar.update(job, advance=1, info=f"student/HEFT {ratio:.4f}")
    return out


def build_trajectories(config: DagGeneratorConfig, seed: int, dags: int, cache: Path) -> list[QTrajectory]:
    """The teacher's trajectories on training DAGs ``0 … dags-1`` of ``seed``: read from
    ``cache`` (resumed when it holds fewer), generated otherwise (~1.5 s a DAG)."""
    try:  # another generator config or an older teacher's labels: made again, not reused (nor an error)
        have = load_trajectories(cache, config) if cache.exists() else []
    except ValueError:
        have = []
    have = [t for t in have if t.seed == seed and t.index < dags]
    done = {t.index for t in have}
    todo = [i for i in range(dags) if i not in done]
    if todo:
        with progress() as bar:
            job = bar.add_task("teacher rollouts", total=len(todo), info="")
            for i in todo:
                have.append(q_trajectory(config, seed, i))
                if len(have) % 10 == 0:
                    save_trajectories(cache, have, config)
                bar.update(job, advance=1, info=f"teacher/HEFT {np.mean([t.makespan / t.heft for t in have]):.4f}")
        save_trajectories(cache, have, config)
    return sorted(have, key=lambda t: t.index)


def featurise_all(trajs: list[QTrajectory], config: DagGeneratorConfig, show: bool = True) -> list[QSample]:
    out: list[QSample] = []
    with progress() as bar:
        job = bar.add_task("features", total=len(trajs), info="", visible=show)
        for t in trajs:
            out += featurise(t, config)
            bar.advance(job)
    return out


def main(dags: int = typer.Option(200, help="training DAGs the rollout teacher labels"),
         epochs: int = typer.Option(40), tau: float = typer.Option(0.005, help="soft-min temperature (share of "
                                                                              "HEFT's makespan)"),
         hidden: int = typer.Option(64), proc_context: bool = typer.Option(True),
         dagger_rounds: int = typer.Option(1), dagger_dags: int = typer.Option(60),
         dagger_epochs: int = typer.Option(20), valid_dags: int = typer.Option(30), seed: int = typer.Option(0),
         cache: Path = typer.Option(None, help="teacher trajectories (default models/dag/cache/q-s<seed>.pkl)"),
         out: Path = typer.Option(MODELS), version: str = typer.Option("")) -> None:  # fmt: skip
    """Train the learned DAG policy on processor Q-values; write models/dag/<version>, point latest at it."""
    try:
        check_latest(out)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--out") from None
    try:  # (train-dag's check, before the teacher: the validation DAGs' seed is seed + an offset)
        check_seed(seed)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--seed") from None
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    config = DagGeneratorConfig()
    t0 = time.perf_counter()
    trajs = build_trajectories(config, seed, dags, cache or out / "cache" / f"q-s{seed}.pkl")
    teacher_ratio = float(np.mean([t.makespan / t.heft for t in trajs]))
    t_teacher = time.perf_counter() - t0
    data = featurise_all(trajs, config)
    net = DagPolicyNet(NetConfig(hidden=hidden, proc_context=proc_context))
    losses = train_q(net, data, epochs=epochs, seed=seed, tau=tau)
    valid = list(training_dags(config, valid_dags, seed + VALIDATION_SEED_OFFSET))
    valid_heft = [heft_makespan(p) for p in valid]
    curve = [greedy_ratio(net, valid, valid_heft)]
    print(f"imitation: valid greedy/HEFT {curve[-1]:.4f}")
    best_state = {k: v.clone() for k, v in net.state_dict().items()}
    for r in range(dagger_rounds):
        lo = dags + r * dagger_dags  # fresh training DAGs of the same stream, never the teacher's
        student = dagger_trajectories(net, config, seed, range(lo, lo + dagger_dags))
        data += featurise_all(student, config)
        losses += train_q(net, data, epochs=dagger_epochs, seed=seed + r + 1, tau=tau, lr=1e-3)
        curve.append(greedy_ratio(net, valid, valid_heft))
        print(f"dagger round {r + 1}: valid greedy/HEFT {curve[-1]:.4f}")
        if curve[-1] <= min(curve[:-1]):
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
    net.load_state_dict(best_state)
    total = time.perf_counter() - t0
    version = version or next_version(out)
    meta = {"version": version, "recipe": "qtrain", "seed": seed, "teacher_dags": dags,
            "teacher_vs_heft": teacher_ratio, "tau": tau, "epochs": epochs, "dagger_rounds": dagger_rounds,
            "dagger_dags": dagger_dags, "dagger_epochs": dagger_epochs, "valid_curve": curve,
            "valid_vs_heft": min(curve), "losses": losses, "generator": config.__dict__,
            "teacher_seconds": t_teacher, "train_seconds": total}  # fmt: skip
    directory = save_model(net, out / version, meta)
    point_latest(out, version)
    print(f"model {directory} (latest -> {version}); teacher/HEFT {teacher_ratio:.4f}, "
          f"valid greedy/HEFT {min(curve):.4f}; {total:.0f} s")


if __name__ == "__main__":
    typer.run(main)
