"""Seeded random DAG problems in the style of Topcuoglu et al. (2002), with log-normal
runtimes.

For a seed the generator draws
- the task count ``v`` uniformly in ``[tasks_min, tasks_max]``;
- the shape: ``round(sqrt(v) / shape)`` hop levels (at least 1, at most ``v``), one task in
  each, the others spread uniformly over the levels — so the mean width is about
  ``shape × sqrt(v)``: ``shape`` > 1 gives wide, parallel DAGs, < 1 long chains;
- edges: every task below the top level gets one parent in the level just above it, and
  each task of the ``jump`` levels above is an extra parent with probability ``density``;
- mean costs ``w̄_i`` log-normal with mean ``mean_cost`` and log-σ ``sigma``; processor
  heterogeneity (Topcuoglu's β): ``W[i, p] ~ U(w̄_i (1 - β/2), w̄_i (1 + β/2))``;
- data volumes log-normal with log-σ ``sigma``, scaled so that the mean communication
  cost (``data / bandwidth``) is exactly ``ccr ×`` the mean computation cost.

The same ``(config, seed)`` always gives the same problem. Held-out DAGs (benchmarks) and
training DAGs (the learned policy) come from disjoint seed streams: :func:`held_out_dags`
and :func:`training_dags`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from scheduling.dag.graph import TaskGraph
from scheduling.dag.platform import Platform
from scheduling.dag.problem import DagProblem

TRAIN, HELD_OUT = 0, 1


@dataclass(frozen=True)
class DagGeneratorConfig:
    tasks_min: int = 20
    tasks_max: int = 150
    processors: int = 4
    shape: float = 1.0
    density: float = 0.2
    jump: int = 2
    ccr: float = 1.0
    beta: float = 0.5
    mean_cost: float = 10.0
    sigma: float = 0.75
    bandwidth: float = 1.0

    def __post_init__(self) -> None:
        checks = [(1 <= self.tasks_min <= self.tasks_max, "need 1 <= tasks_min <= tasks_max"),
                  (self.processors >= 1, "need processors >= 1"), (self.shape > 0, "need shape > 0"),
                  (0 <= self.density <= 1, "need 0 <= density <= 1"), (self.jump >= 1, "need jump >= 1"),
                  (self.ccr >= 0, "need ccr >= 0"), (0 <= self.beta < 2, "need 0 <= beta < 2"),
                  (self.mean_cost > 0, "need mean_cost > 0"), (self.sigma >= 0, "need sigma >= 0"),
                  (self.bandwidth > 0, "need bandwidth > 0")]  # fmt: skip
        errors = [msg for ok, msg in checks if not ok]
        if errors:
            raise ValueError("invalid DAG generator config: " + "; ".join(errors))


def generate_dag(config: DagGeneratorConfig, seed: int | Sequence[int], *, name: str = "") -> DagProblem:
    rng = np.random.default_rng(seed)
    v = int(rng.integers(config.tasks_min, config.tasks_max + 1))
    depth = int(np.clip(round(np.sqrt(v) / config.shape), 1, v))
    level = np.sort(np.concatenate([np.arange(depth), rng.integers(0, depth, v - depth)]))
    src, dst = _edges(rng, level, depth, config.density, config.jump)
    mean_w = rng.lognormal(np.log(config.mean_cost) - config.sigma**2 / 2, config.sigma, v)
    spread = rng.uniform(1 - config.beta / 2, 1 + config.beta / 2, (v, config.processors))
    costs = mean_w[:, None] * spread
    data = rng.lognormal(0.0, config.sigma, len(src))
    if len(src) and config.ccr > 0:
        data *= config.ccr * costs.mean() * config.bandwidth / data.mean()
    else:
        data[:] = 0.0
    graph = TaskGraph(tuple(f"t{i}" for i in range(v)), src, dst, data)
    platform = Platform.uniform(config.processors, bandwidth=config.bandwidth)
    label = name or "random-" + "-".join(str(s) for s in np.atleast_1d(seed))
    return DagProblem(graph, platform, costs, name=label)


def _edges(rng: np.random.Generator, level: np.ndarray, depth: int, density: float,
           jump: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Tasks are numbered level by level, so every edge goes from a lower to a higher index."""
    starts = np.searchsorted(level, np.arange(depth + 1))
    src_parts, dst_parts = [], []
    for lv in range(1, depth):
        kids = np.arange(starts[lv], starts[lv + 1])
        above = np.arange(starts[lv - 1], starts[lv])
        mandatory = above[rng.integers(0, len(above), len(kids))]
        cands = np.arange(starts[max(0, lv - jump)], starts[lv])
        extra = rng.random((len(cands), len(kids))) < density
        extra[np.searchsorted(cands, mandatory), np.arange(len(kids))] = True
        s, d = np.nonzero(extra)
        src_parts.append(cands[s])
        dst_parts.append(kids[d])
    if not src_parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(src_parts), np.concatenate(dst_parts)


def check_stream_seed(seed: int) -> None:
    """``ValueError`` unless ``seed`` is one 32-bit word of a stream key: numpy's SeedSequence splits a
    larger int into two words, and (seed, HELD_OUT, k) could then equal a training key (found by
    review: held-out seed 1 gave the first training DAG of seed 2**32)."""
    if not 0 <= seed < 2**32:
        raise ValueError(f"DAG stream seed must be within 0 .. 2**32 - 1, not {seed}")


def held_out_dags(config: DagGeneratorConfig, n: int, seed: int = 0) -> Iterator[DagProblem]:
    """``n`` evaluation DAGs; never the same streams as :func:`training_dags`."""
    check_stream_seed(seed)
    for k in range(n):
        yield generate_dag(config, (seed, HELD_OUT, k), name=f"held-out-{seed}-{k}")


def training_dags(config: DagGeneratorConfig, n: int, seed: int = 0) -> Iterator[DagProblem]:
    check_stream_seed(seed)
    for k in range(n):
        yield generate_dag(config, (seed, TRAIN, k), name=f"train-{seed}-{k}")
