"""Expert demonstrations: (state, expert action) pairs recorded while an expert policy runs.

:class:`RecordingPolicy` wraps any scheduling policy and behaves exactly like it (same
order, scores and GPU choice), recording a sample of its ``score`` calls: the features the
learned scorer sees (node state, job demand, pair features on the current capacity, the
step's queue summary), the feasibility mask and the expert's TARGET SET — every feasible
node with the expert's best score. FGD's scores are integers and tie often; the benchmark
then takes the lowest node index, an arbitrary choice among equals, so the set (not one
node) is what the learner should hit.

Because it is a plain policy, the same wrapper records the openb fill sequence
(:func:`collect_fill`, through :func:`scheduling.fill.run_fill`) and the simulator
(``simulate(..., RecordingPolicy(...))``). Only informative states are kept: at least two
feasible nodes and a target set smaller than the feasible set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from inference.encoders.base import TextEncoder
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from inference.features.spec import FeatureSpec
from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.policies.base import Policy
from scheduling.snapshot import ClusterSnapshot


@dataclass
class Demonstrations:
    """Samples; each names its node table (``group``), since a topology belongs to one table
    (the fill benchmark permutes the nodes per seed)."""

    nodes: list[np.ndarray] = field(default_factory=list)  # [N, node_dim] each
    pairs: list[np.ndarray] = field(default_factory=list)  # [N, pair_dim]
    jobs: list[np.ndarray] = field(default_factory=list)  # [job_dim]
    queues: list[np.ndarray] = field(default_factory=list)  # [job_dim]
    feasible: list[np.ndarray] = field(default_factory=list)  # bool [N]
    target: list[np.ndarray] = field(default_factory=list)  # bool [N]: the expert's best nodes
    source: list[str] = field(default_factory=list)  # "fill seed 3", …
    group: list[int] = field(default_factory=list)  # index into ``snapshots``: which node table (topology)
    snapshots: list[ClusterSnapshot] = field(default_factory=list)  # one per node table seen

    def __len__(self) -> int:
        return len(self.target)

    def extend(self, other: Demonstrations) -> None:
        for name in ("nodes", "pairs", "jobs", "queues", "feasible", "target", "source"):
            getattr(self, name).extend(getattr(other, name))
        self.group.extend(g + len(self.snapshots) for g in other.group)
        self.snapshots.extend(other.snapshots)

    def subset(self, keep: np.ndarray) -> Demonstrations:
        """The samples where ``keep`` (bool per sample) is True (snapshots shared)."""
        out = Demonstrations(snapshots=self.snapshots)
        for name in ("nodes", "pairs", "jobs", "queues", "feasible", "target", "source", "group"):
            getattr(out, name).extend(v for v, k in zip(getattr(self, name), keep, strict=True) if k)
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: np.stack(getattr(self, name)) for name in ("nodes", "pairs", "jobs", "queues", "feasible",
                                                                "target")}  # fmt: skip


class RecordingPolicy:
    """Acts as ``expert``; records a ``rate`` share of its informative ``score`` calls."""

    def __init__(self, expert: Policy, spec: FeatureSpec, encoder: TextEncoder, *, rate: float, seed: int,
                 source: str = "", keep: Callable[[int, int], bool] | None = None) -> None:  # fmt: skip
        self.expert = expert
        self.name = expert.name
        self.spec = spec
        self.encoder = encoder
        self.rate = rate
        self.rng = np.random.default_rng(seed)
        self.source = source
        self.keep = keep
        self.demos = Demonstrations()
        self._now: float | None = None
        self._queue: np.ndarray | None = None

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ordered = self.expert.order(jobs, now, context)
        self._now = now
        self._queue = job_demand(ordered, now, self.spec, self.encoder).mean(axis=0) if ordered else None
        return ordered

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        choose = getattr(self.expert, "select_gpus", None) or best_fit_gpus
        return choose(snapshot, node_index, job)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        scores = np.asarray(self.expert.score(job, snapshot, feasible_mask), dtype=np.float64)
        if self.rng.random() < self.rate:
            self._record(job, snapshot, feasible_mask, scores)
        return scores

    def _record(self, job: JobRequest, snapshot: ClusterSnapshot, feasible: np.ndarray, scores: np.ndarray) -> None:
        masked = np.where(feasible & ~np.isnan(scores), scores, -np.inf)
        best = masked.max(initial=-np.inf)
        if best == -np.inf:
            return
        target = masked == best
        n_feasible, n_target = int(feasible.sum()), int(target.sum())
        if n_feasible < 2 or n_target == n_feasible or (self.keep is not None and not self.keep(n_feasible, n_target)):
            return
        now = self._now if self._now is not None else job.submit_time
        d = self.demos
        d.nodes.append(node_state(snapshot, self.spec))
        d.pairs.append(pair_features(job, snapshot))
        d.jobs.append(job_demand([job], now, self.spec, self.encoder)[0])
        d.queues.append(np.zeros(self.spec.job_dim, np.float32) if self._queue is None else self._queue)
        d.feasible.append(feasible.copy())
        d.target.append(target)
        d.source.append(self.source)
        if not d.snapshots or d.snapshots[-1].table is not snapshot.table:
            d.snapshots.append(snapshot.copy())
        d.group.append(len(d.snapshots) - 1)


def collect_fill(nodes: Sequence, pods: Sequence[JobRequest], expert_factory: Callable[[int], Policy],
                 seeds: Sequence[int], spec: FeatureSpec, encoder: TextEncoder, *, rate: float,
                 seed: int = 0, on_seed: Callable[[int, int], None] | None = None) -> Demonstrations:  # fmt: skip
    """Run the fill benchmark's sequence for each of ``seeds`` under the expert and record.

    ``expert_factory(seed)`` builds a fresh expert per run; ``on_seed(seed, samples)`` reports progress.
    """
    from scheduling.fill import fill_sequence, run_fill

    capacity = sum(n.num_gpu for n in nodes) * 1000
    out = Demonstrations()
    for s in seeds:
        rec = RecordingPolicy(expert_factory(s), spec, encoder, rate=rate, seed=seed * 1_000_003 + s,
                              source=f"fill seed {s}")  # fmt: skip
        run_fill(nodes, fill_sequence(pods, capacity, s), rec, s)  # type: ignore[arg-type]
        out.extend(rec.demos)
        if on_seed is not None:
            on_seed(s, len(rec.demos))
    return out
