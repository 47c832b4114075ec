"""Rollouts of the learned scorer in the openb fill environment, for RL fine-tuning
(:mod:`inference.training.rl`).

An **episode** is one training seed's fill arrival sequence (:func:`scheduling.fill.fill_sequence`)
cut just after the point the benchmark measures (arrived GPU demand 100 %: the events whose
arrived % rounds to 100), placed one pod at a time by :func:`scheduling.fill.run_fill` — the
benchmark's own placement path, node permutation and GPU choice. The learned policy is the
``learned`` policy itself (:class:`inference.policy.LearnedPolicy` serving the model in-process),
so the greedy rollout decides exactly as ``semsched bench fill --policies learned`` would.

:class:`SamplingPolicy` wraps it: at each placement it SAMPLES a node from
``softmax(scores / temperature)`` over the feasible nodes (Gumbel-max) instead of taking the
argmax, and records a share of the states it visits (node state, job row, pair features,
feasible mask, chosen node, the behaviour log-prob) — what the update needs to recompute
``log π(a | s)``. States where the chosen node already had probability ``≥ 1 − eps`` are not
recorded: ``∇ log π(a | s)`` there is ``O(eps)`` (it is ``∇s_a − Σ π_i ∇s_i``), so skipping them
changes the gradient by at most that much and saves most of the memory (1,213 nodes × ~40
float32 features ≈ 190 kB per state).

**Reward** (:func:`returns_to_go`): the benchmark's number, allocated GPU % at 100 % arrived =
mean over the window events ``e`` of ``arrived_e − Σ_{t ≤ e} dropped_t`` (in % of capacity).
The arrived part is the same for every rollout of a seed, so the return that placement ``t``
can still change is ``R_t = −Σ_{t' ≥ t} dropped_t' · (share of window events at or after t')``
— the exact reward-to-go decomposition of the final value, no shaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inference.encoders import EncoderCache, get_encoder
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from scheduling.fill import FillRun, fill_sequence, gpu_demand, run_fill
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot

#: the episode stops after the last event whose arrived % still rounds to 100 (the measured point)
STOP_PCT = 100.5


def episode_sequence(pods: Sequence[JobRequest], capacity_milli: int, seed: int,
                     stop_pct: float = STOP_PCT) -> list[JobRequest]:  # fmt: skip
    """The benchmark's arrival sequence for ``seed``, cut before the first pod that takes the
    arrived GPU demand to ``stop_pct`` % (a prefix: later pods cannot change the measured value)."""
    seq = fill_sequence(pods, capacity_milli, seed)
    arrived = np.cumsum([gpu_demand(p) for p in seq]) / capacity_milli * 100
    return seq[: int(np.searchsorted(arrived, stop_pct, side="left"))]


def window(run: FillRun) -> np.ndarray:
    """Indices of the events the benchmark averages for "allocated at 100 % arrived"
    (:meth:`FillRun.allocated_at`: arrived % rounds to 100, else 99, else 101); when none does
    (tiny clusters), the event whose arrived % is nearest to 100."""
    pct = run.arrived / run.capacity_milli * 100
    rounded = np.floor(pct + 0.5)
    for x in (100, 99, 101):
        hit = np.flatnonzero(rounded == x)
        if len(hit):
            return hit
    return np.array([int(np.argmin(np.abs(pct - 100)))])


def terminal_value(run: FillRun) -> float:
    """The episode's value: allocated GPU % at 100 % arrived, averaged over :func:`window`."""
    return float((run.allocated[window(run)] / run.capacity_milli * 100).mean())


def returns_to_go(run: FillRun) -> np.ndarray:
    """float64 ``[T]``: ``R_t``, the part of :func:`terminal_value` that placements ``t, t+1, …``
    decide (≤ 0; ``R_0 + mean arrived % over the window = terminal_value``)."""
    arrived = np.diff(run.arrived, prepend=0)
    allocated = np.diff(run.allocated, prepend=0)
    dropped = (arrived - allocated) / run.capacity_milli * 100  # % of capacity each event failed to place
    w = window(run)
    after = np.zeros(len(dropped) + 1)
    np.add.at(after, w + 1, 1.0)
    share = 1.0 - np.cumsum(after)[:-1] / len(w)  # share of window events e >= t
    return np.cumsum((-dropped * share)[::-1])[::-1]


@dataclass
class States:
    """Recorded states of one rollout (one node table), float32."""

    nodes: list[np.ndarray] = field(default_factory=list)  # [N, node_dim]
    pairs: list[np.ndarray] = field(default_factory=list)  # [N, pair_dim]
    jobs: list[np.ndarray] = field(default_factory=list)  # [job_dim]
    feasible: list[np.ndarray] = field(default_factory=list)  # bool [N]
    chosen: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)  # behaviour log-prob of the chosen node
    step: list[int] = field(default_factory=list)  # the pod's index in the episode sequence

    def __len__(self) -> int:
        return len(self.chosen)


class SamplingPolicy:
    """Acts as ``inner`` (a :class:`~inference.policy.LearnedPolicy`) but samples the node from
    ``softmax(scores / temperature)`` over the feasible nodes; records a ``state_rate`` share of
    the states where the chosen node's probability is below ``1 − eps``."""

    def __init__(self, inner: Any, sequence: Sequence[JobRequest], *, temperature: float, seed: int,
                 state_rate: float, eps: float = 1e-3) -> None:  # fmt: skip
        if temperature <= 0:
            raise ValueError("temperature must be > 0")
        self.inner = inner
        self.name = inner.name
        self.spec = inner.spec
        self.encoder = EncoderCache(get_encoder(self.spec.encoder))
        self.temperature = temperature
        self.state_rate = state_rate
        self.eps = eps
        self.rng = np.random.default_rng(seed)
        self.position = {job.job_id: i for i, job in enumerate(sequence)}
        self.states = States()
        self.deviations = 0  # placements where the sample is not the argmax

    def order(self, jobs: Sequence[JobRequest], now: float, context: Any = None) -> list[JobRequest]:
        return self.inner.order(jobs, now, context)

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        return self.inner.select_gpus(snapshot, node_index, job)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        scores = np.asarray(self.inner.score(job, snapshot, feasible_mask), dtype=np.float64)
        ok = feasible_mask & np.isfinite(scores)
        if not ok.any():
            return scores
        x = np.where(ok, scores / self.temperature, -np.inf)
        top = x.max()
        logp = x - top - np.log(np.exp(x - top).sum())
        gumbel = -np.log(-np.log(self.rng.random(len(x)).clip(1e-300, 1.0)))
        chosen = int(np.argmax(np.where(ok, x + gumbel, -np.inf)))
        self.deviations += chosen != int(np.argmax(x))
        if logp[chosen] < np.log1p(-self.eps) and self.rng.random() < self.state_rate:
            self._record(job, snapshot, feasible_mask, chosen, float(logp[chosen]))
        out = np.where(feasible_mask, 0.0, -np.inf)
        out[chosen] = 1.0
        return out

    def _record(self, job: JobRequest, snapshot: ClusterSnapshot, feasible: np.ndarray, chosen: int,
                logp: float) -> None:  # fmt: skip
        s = self.states
        s.nodes.append(node_state(snapshot, self.spec).astype(np.float32, copy=False))
        s.pairs.append(pair_features(job, snapshot, self.spec).astype(np.float32, copy=False))
        # as the learned policy featurises a fill placement: the job's own time as "now"
        s.jobs.append(job_demand([job], job.submit_time, self.spec, self.encoder)[0].astype(np.float32, copy=False))
        s.feasible.append(feasible.copy())
        s.chosen.append(chosen)
        s.logp.append(logp)
        s.step.append(self.position[job.job_id])


def learned_policy(model: Any, version: str = "rl") -> Any:
    """The ``learned`` policy serving ``model`` (a Scorer, updated in place) in-process."""
    from inference.model.io import LoadedModel
    from inference.policy import LearnedPolicy

    return LearnedPolicy(loaded=LoadedModel(model, model.config, version, Path(".")))


def node_table(nodes: Sequence[NodeView], seed: int) -> ClusterSnapshot:
    """The snapshot :func:`run_fill` builds for ``seed`` (its seeded node permutation): the node
    table the recorded states belong to (for their topology)."""
    rng = np.random.default_rng(seed + 1_000_003)
    return ClusterSnapshot.from_nodes([nodes[i] for i in rng.permutation(len(nodes))])


def greedy_rollout(model: Any, nodes: Sequence[NodeView], sequence: Sequence[JobRequest], seed: int) -> FillRun:
    model.eval()
    return run_fill(nodes, sequence, learned_policy(model), seed)


def sampled_rollout(model: Any, nodes: Sequence[NodeView], sequence: Sequence[JobRequest], seed: int, *,
                    temperature: float, sample_seed: int, state_rate: float,
                    eps: float = 1e-3) -> tuple[FillRun, SamplingPolicy]:  # fmt: skip
    model.eval()
    policy = SamplingPolicy(learned_policy(model), sequence, temperature=temperature, seed=sample_seed,
                            state_rate=state_rate, eps=eps)  # fmt: skip
    return run_fill(nodes, sequence, policy, seed), policy  # type: ignore[arg-type]
