"""The learned two-stage policy on :class:`~scheduling.dag.env.ListSchedulingEnv`, and the
DAG schedulers ``learned`` and ``learned-sample`` (registered when :mod:`inference.dag` is
imported).

Where the model comes from: the ``model_dir`` argument, else ``$SEMSCHED_DAG_MODEL``, else
``<repo>/models/dag/latest`` (what ``semsched train-dag`` writes). When there
is no model there, the scheduler falls back to HEFT: it warns once (``RuntimeWarning``,
naming the directory), and ``scheduler.fallback`` says why; ``strict=True`` raises
``FileNotFoundError`` instead.

- ``learned``: greedy (the most likely ready task, then the most likely processor).
- ``learned-sample``: the greedy schedule plus ``samples - 1`` schedules sampled from the
  policy (seeded), keeping the shortest — the policy used as a search prior.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import torch

from inference.dag.features import DagContext, TaskView, dag_context, proc_features, task_view
from inference.dag.model import DagModelError, DagPolicyNet, load_model
from scheduling.dag import DagProblem, ListSchedulingEnv, Schedule
from scheduling.dag.schedulers import get_dag_scheduler, register_dag_scheduler, run_policy

MODEL_ENV = "SEMSCHED_DAG_MODEL"
#: softmax temperature of the sampled schedules of ``learned-sample`` (1: as trained; 2.5 measured worse)
SAMPLE_TEMPERATURE = 1.0
DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "dag" / "latest"


def model_dir_from_env(model_dir: Path | str | None = None) -> Path:
    return Path(model_dir or os.environ.get(MODEL_ENV) or DEFAULT_MODEL_DIR)


class NetPolicy:
    """A :class:`~scheduling.dag.schedulers.TwoStagePolicy` driven by a :class:`DagPolicyNet`.

    Greedy by default; with ``generator`` it samples. With ``record=True`` it keeps the
    log-probability of every choice (with gradients) for policy-gradient training.
    """

    def __init__(self, net: DagPolicyNet, ctx: DagContext, *, generator: torch.Generator | None = None,
                 record: bool = False, temperature: float = 1.0) -> None:  # fmt: skip
        self.net, self.ctx, self.generator, self.record = net, ctx, generator, record
        self.temperature = temperature
        self.log_probs: list[torch.Tensor] = []
        self._view: TaskView | None = None
        self._emb: torch.Tensor | None = None

    def _choose(self, logits: torch.Tensor) -> int:
        if self.generator is None:
            choice = int(torch.argmax(logits))
        else:
            probs = torch.softmax(logits.detach() / self.temperature, dim=-1)
            choice = int(torch.multinomial(probs, 1, generator=self.generator))
        if self.record:  # log π of the distribution sampled from (found by review: the temperature was left out)
            self.log_probs.append(torch.log_softmax(logits / self.temperature, dim=-1)[choice])
        return choice

    def select_task(self, env: ListSchedulingEnv) -> int:
        view = task_view(self.ctx, env)
        with torch.set_grad_enabled(self.record):
            x = torch.from_numpy(view.x).unsqueeze(0)
            logits, emb = self.net.task_logits(x, torch.ones(1, len(view.ready), dtype=torch.bool))
            row = self._choose(logits[0])
        self._view, self._emb = view, emb[0, row]
        return int(view.ready[row])

    def processor_for(self, env: ListSchedulingEnv, task: int) -> int:
        """Stage two for a task the caller chose (e.g. a DAgger rollout that fixes the task)."""
        view = task_view(self.ctx, env)
        row = int(np.flatnonzero(view.ready == task)[0])
        with torch.set_grad_enabled(self.record):
            _, emb = self.net.task_logits(torch.from_numpy(view.x).unsqueeze(0),
                                          torch.ones(1, len(view.ready), dtype=torch.bool))  # fmt: skip
        self._view, self._emb = view, emb[0, row]
        return self.select_processor(env, task)

    def select_processor(self, env: ListSchedulingEnv, task: int) -> int:
        view, emb = self._view, self._emb
        if view is None or emb is None or task not in view.ready:
            raise RuntimeError("select_processor must follow select_task for the same task")
        row = int(np.flatnonzero(view.ready == task)[0])
        x = proc_features(self.ctx, env, view, row)[:, : self.net.config.proc_dim]  # older models: fewer
        x = torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(0)
        with torch.set_grad_enabled(self.record):
            logits = self.net.proc_logits(x, emb.unsqueeze(0), torch.ones(1, x.shape[1], dtype=torch.bool))
            return self._choose(logits[0])


def schedule_with(net: DagPolicyNet, problem: DagProblem, *, generator: torch.Generator | None = None,
                  temperature: float = 1.0) -> Schedule:  # fmt: skip
    """One schedule of ``problem`` by ``net`` (greedy, or sampled with ``generator`` at ``temperature``)."""
    policy = NetPolicy(net, dag_context(problem), generator=generator, temperature=temperature)
    return run_policy(ListSchedulingEnv(problem, insertion=True), policy)


@register_dag_scheduler("learned")
class LearnedDagScheduler:
    """The learned policy as a DAG scheduler (see the module docstring for where its model comes from)."""

    name = "learned"

    def __init__(self, model_dir: Path | str | None = None, *, samples: int = 1, seed: int = 0,
                 temperature: float = SAMPLE_TEMPERATURE, strict: bool = False) -> None:  # fmt: skip
        self.model_dir = model_dir_from_env(model_dir)
        self.samples, self.seed, self.temperature = max(1, samples), seed, temperature
        self.net: DagPolicyNet | None = None
        self.fallback: str | None = None
        try:
            self.net = load_model(self.model_dir)
        except (FileNotFoundError, DagModelError) as e:
            if strict:
                raise
            self.fallback = (f"{e}; scheduling with HEFT instead (train a model with `semsched train-dag`, or name "
                             f"one with {MODEL_ENV})")  # fmt: skip
            warnings.warn(f"learned DAG scheduler: {self.fallback}", RuntimeWarning, stacklevel=2)

    def schedule(self, problem: DagProblem) -> Schedule:
        if self.net is None:
            return get_dag_scheduler("heft").schedule(problem)
        best = schedule_with(self.net, problem)
        gen = torch.Generator().manual_seed(self.seed)
        for _ in range(self.samples - 1):
            cand = schedule_with(self.net, problem, generator=gen, temperature=self.temperature)
            if cand.makespan < best.makespan:
                best = cand
        return best


@register_dag_scheduler("learned-sample")
class LearnedSampleDagScheduler(LearnedDagScheduler):
    """``learned`` with 16 schedules (greedy + 15 sampled), keeping the shortest."""

    name = "learned-sample"

    def __init__(self, model_dir: Path | str | None = None, *, samples: int = 16, seed: int = 0,
                 temperature: float = SAMPLE_TEMPERATURE, strict: bool = False) -> None:  # fmt: skip
        super().__init__(model_dir, samples=samples, seed=seed, temperature=temperature, strict=strict)
