"""Expert demonstrations: (state, expert action) pairs recorded while an expert policy runs.

:class:`RecordingPolicy` wraps any scheduling policy and behaves exactly like it (same
order, scores and GPU choice), recording a sample of its ``score`` calls: the features the
learned scorer sees (the node state and queue summary of the model call that would cover the job,
:mod:`inference.training.queue_windows`; its job demand; pair features on the current capacity), the feasibility mask and the expert's TARGET SET — every feasible
node with the expert's best score. FGD's scores are integers and tie often; the benchmark
then takes the lowest node index, an arbitrary choice among equals, so the set (not one
node) is what the learner should hit.

Because it is a plain policy, the same wrapper records the openb fill sequence
(:func:`collect_fill`, through :func:`scheduling.fill.run_fill`) and the simulator
(``simulate(..., RecordingPolicy(...))``). Only informative states are kept: at least two
feasible nodes and a target set smaller than the feasible set (``all_ties=True`` also keeps
the states where every feasible node ties: the expert's actual pick, the lowest index, is
still a choice).

Besides the set, each sample records the expert's ACTUAL pick (``choice``: the first best
node, as :func:`scheduling.assign.place_one` takes it) — the set target loses the
tie-break, which is what makes FGD pack (FGD with random tie-breaks: 90 % instead of 95 %
on fill seed 0) — and, for the auxiliary heads, the cost label of every node (``cost``: the
fragmentation the placement adds under the spec's workload, :mod:`inference.features.cluster`;
zeros without a workload), the job's recorded run time (``run_time``, the outcome: a label only,
never a feature; NaN when the trace has none) and the chosen node's state row after the placement (``next_row``) and before it (``prev_row``),
from which the transition model's target is built.

**DAgger** (:mod:`inference.training.dagger`): with ``actor=`` another policy (the learner),
the wrapper ACTS as the actor (its scores and GPU choice decide) while recording the
expert's labels on the states the actor visits; ``beta`` is the probability that the expert
acts instead, per decision. The expert is then only asked at recorded states, which is right
for stateless experts (FGD with a fixed workload, best-fit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.encoders.base import TextEncoder
from inference.features.cluster import frag_pair_features
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from inference.features.spec import FeatureSpec
from inference.training.queue_windows import QueueWindows
from scheduling.assign import forget_placement
from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import Workload
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
    choice: list[int] = field(default_factory=list)  # the expert's actual pick (first best node)
    cost: list[np.ndarray] = field(default_factory=list)  # float32 [N]: cost label per node (frag added)
    run_time: list[float] = field(default_factory=list)  # the job's recorded run time, s (NaN: unknown): ψ's 2nd label
    next_row: list[np.ndarray] = field(default_factory=list)  # [node_dim]: the chosen node's row after placing
    prev_row: list[np.ndarray] = field(default_factory=list)  # [node_dim]: ... and just before (not the window's)
    tokens: list[np.ndarray] = field(default_factory=list)  # [K, job_dim]: the step's pending jobs, this one first
    source: list[str] = field(default_factory=list)  # "fill seed 3", …
    group: list[int] = field(default_factory=list)  # index into ``snapshots``: which node table (topology)
    snapshots: list[ClusterSnapshot] = field(default_factory=list)  # one per node table seen

    def __len__(self) -> int:
        return len(self.target)

    def has(self, name: str) -> bool:
        """Whether the optional field ``name`` (``choice``, ``cost``, ``run_time``, ``next_row``, ``tokens``) is there for every sample
        (code that appends samples itself may fill only the required fields)."""
        return len(getattr(self, name)) == len(self) > 0

    def extend(self, other: Demonstrations) -> None:
        for name in OPTIONAL:  # kept only while every sample has it
            mine, theirs = getattr(self, name), getattr(other, name)
            complete = (len(mine) == len(self)) and (len(theirs) == len(other))
            setattr(self, name, mine + theirs if complete else [])
        for name in REQUIRED + ("source",):
            getattr(self, name).extend(getattr(other, name))
        self.group.extend(g + len(self.snapshots) for g in other.group)
        self.snapshots.extend(other.snapshots)

    def subset(self, keep: np.ndarray) -> Demonstrations:
        """The samples where ``keep`` (bool per sample) is True (snapshots shared)."""
        out = Demonstrations(snapshots=self.snapshots)
        for name in (*REQUIRED, *(n for n in OPTIONAL if self.has(n)), "source", "group"):
            getattr(out, name).extend(v for v, k in zip(getattr(self, name), keep, strict=True) if k)
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """Stacked fields: the required ones, and the optional ones every sample has (not the ragged ``tokens``).
        The per-node fields (:data:`PER_NODE`) of samples from smaller node tables are padded with zeros (not
        feasible, no target) to the largest table's size: a batch within one table (``group``) is sliced to
        its own table's size (found by review: two clusters of different sizes in one archive failed here)."""
        out = {}
        for name in (*REQUIRED, *(n for n in OPTIONAL if self.has(n))):
            if name in RAGGED:
                continue
            values = getattr(self, name)
            if name in PER_NODE and len({len(v) for v in values}) > 1:
                n = max(len(v) for v in values)
                values = [v if len(v) == n else np.concatenate([v, np.zeros((n - len(v), *v.shape[1:]), v.dtype)])
                          for v in values]  # fmt: skip
            out[name] = np.stack(values)
        return out


REQUIRED = ("nodes", "pairs", "jobs", "queues", "feasible", "target")
PER_NODE = ("nodes", "pairs", "feasible", "target", "cost")  # [N, ...] per sample: N is its node table's size
OPTIONAL = ("choice", "cost", "run_time", "next_row", "prev_row", "tokens")
RAGGED = ("tokens",)  # a length per sample: not in ``arrays()``


class RecordingPolicy:
    """Acts as ``expert`` (or as ``actor``, see the module docstring); records a ``rate`` share
    of the informative ``score`` calls with the expert's labels."""

    def __init__(self, expert: Policy, spec: FeatureSpec, encoder: TextEncoder, *, rate: float, seed: int,
                 source: str = "", keep: Callable[[int, int], bool] | None = None, all_ties: bool = False,
                 actor: Policy | None = None, beta: float = 0.0, label_spec: FeatureSpec | None = None) -> None:  # fmt: skip
        """``label_spec``: the spec whose workload ψ's fragmentation label is measured against (default
        ``spec``; :func:`label_spec` for a model without FGD's feature columns)."""
        self.expert = expert
        self.label_spec = label_spec or spec
        self.actor = actor
        self.beta = beta
        self.all_ties = all_ties
        self._acting: Policy = expert
        self.name = expert.name if actor is None else actor.name
        self.spec = spec
        self.encoder = encoder
        self.rate = rate
        self.rng = np.random.default_rng(seed)
        self.source = source
        self.keep = keep
        self.demos = Demonstrations()
        self._now: float | None = None
        self._windows: QueueWindows | None = None
        self._window: Any = None  # the window covering the job being scored

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ordered = (self.actor or self.expert).order(jobs, now, context)
        self._now = now
        # the model call's windows, whose mean row is its queue summary (inference/training/queue_windows.py)
        self._windows = QueueWindows(ordered, lambda js: job_demand(js, now, self.spec, self.encoder),
                                     lambda snap: node_state(snap, self.spec))  # fmt: skip
        return ordered

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        return _gpus(self._acting, snapshot, node_index, job)

    def forget(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> None:
        """A placement of the step was rolled back (a gang that did not fit whole): the windows see capacity
        return, and the acting policy is told, as it would be without the recorder (found by review)."""
        if self._windows is not None:
            self._windows.forget()
        forget_placement(self._acting, snapshot, node_index, job)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        record = self.rng.random() < self.rate
        self._window = self._windows.window(job, snapshot) if self._windows is not None else None  # (every job
        # that reaches scoring: the windows open on the cluster as the step has changed it so far)
        if self.actor is None:
            scores = np.asarray(self.expert.score(job, snapshot, feasible_mask), dtype=np.float64)
            if record:
                self._record(job, snapshot, feasible_mask, scores)
            return scores
        self._acting = self.expert if self.beta > 0 and self.rng.random() < self.beta else self.actor
        if record:  # label the visited state with the expert's scores (before the actor changes anything)
            self._record(job, snapshot, feasible_mask,
                         np.asarray(self.expert.score(job, snapshot, feasible_mask), dtype=np.float64))  # fmt: skip
        return np.asarray(self._acting.score(job, snapshot, feasible_mask), dtype=np.float64)

    def _record(self, job: JobRequest, snapshot: ClusterSnapshot, feasible: np.ndarray, scores: np.ndarray) -> None:
        masked = np.where(feasible & ~np.isnan(scores), scores, -np.inf)
        best = masked.max(initial=-np.inf)
        if best == -np.inf:
            return
        target = masked == best
        n_feasible, n_target = int(feasible.sum()), int(target.sum())
        if n_feasible < 2 or (n_target == n_feasible and not self.all_ties):
            return
        if self.keep is not None and not self.keep(n_feasible, n_target):
            return
        now = self._now if self._now is not None else job.submit_time
        d = self.demos
        d.nodes.append(node_state(snapshot, self.spec) if self._window is None else self._window.nodes)
        d.pairs.append(pair_features(job, snapshot, self.spec))
        d.jobs.append(job_demand([job], now, self.spec, self.encoder)[0])
        d.queues.append(np.zeros(self.spec.job_dim, np.float32) if self._window is None else self._window.summary)
        d.feasible.append(feasible.copy())
        d.target.append(target)
        choice = int(np.argmax(masked))  # first best: place_one's tie-break
        d.choice.append(choice)
        d.cost.append(frag_pair_features(job, snapshot, self.label_spec)[:, 0] if self.label_spec.workload
                      else np.zeros(snapshot.num_nodes, np.float32))  # fmt: skip
        d.run_time.append(np.nan if job.trace_duration_s is None else float(job.trace_duration_s))
        d.next_row.append(_next_row(self.expert, snapshot, choice, job, self.spec))
        d.prev_row.append(d.nodes[-1][choice] if self._window is None else node_state(snapshot, self.spec)[choice])
        d.source.append(self.source)
        if not d.snapshots or d.snapshots[-1].table is not snapshot.table:
            d.snapshots.append(snapshot.copy())
        d.group.append(len(d.snapshots) - 1)


def _gpus(policy: Policy, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
    choose = getattr(policy, "select_gpus", None) or best_fit_gpus
    return choose(snapshot, node_index, job)


def _next_row(expert: Policy, snapshot: ClusterSnapshot, choice: int, job: JobRequest, spec: FeatureSpec) -> np.ndarray:
    """Node ``choice``'s state row after the expert places ``job`` there (on a copy)."""
    after = snapshot.copy()
    gpus = _gpus(expert, after, choice, job)
    after.reserve(choice, job, gpus or ())
    return node_state(after, spec)[choice]


def label_spec(spec: FeatureSpec, jobs: Iterable[JobRequest]) -> FeatureSpec:
    """``spec``, with FGD's workload of ``jobs`` when it has none: ψ's fragmentation label is the
    fragmentation a placement adds against the workload, whatever columns the model reads (found by
    review: a model without FGD's columns learned a label of 0, and its records said ψ ≈ 0 GPU)."""
    jobs = list(jobs)
    if spec.workload or not jobs:  # (no job: no workload, and no placement to label)
        return spec
    return dataclasses.replace(spec, workload=FeatureSpec.workload_rows(Workload.from_jobs(jobs)))


def collect_fill(nodes: Sequence, pods: Sequence[JobRequest], expert_factory: Callable[[int], Policy],
                 seeds: Sequence[int], spec: FeatureSpec, encoder: TextEncoder, *, rate: float,
                 seed: int = 0, on_seed: Callable[[int, int], None] | None = None, all_ties: bool = False,
                 actor_factory: Callable[[int], Policy] | None = None, beta: float = 0.0) -> Demonstrations:  # fmt: skip
    """Run the fill benchmark's sequence for each of ``seeds`` under the expert and record.

    ``expert_factory(seed)`` builds a fresh expert per run; ``on_seed(seed, samples)`` reports progress.
    ``actor_factory(seed)``: DAgger — the actor (the learner) places the pods, the expert labels
    the states it visits (``beta``: the share of decisions the expert takes instead).
    """
    from scheduling.fill import fill_sequence, run_fill

    capacity = sum(n.num_gpu for n in nodes) * 1000
    out = Demonstrations()
    labels = label_spec(spec, pods)
    for s in seeds:
        actor = actor_factory(s) if actor_factory is not None else None
        rec = RecordingPolicy(expert_factory(s), spec, encoder, rate=rate, seed=seed * 1_000_003 + s,
                              source=f"fill seed {s}" + (" (dagger)" if actor else ""), all_ties=all_ties,
                              actor=actor, beta=beta, label_spec=labels)  # fmt: skip
        run_fill(nodes, fill_sequence(pods, capacity, s), rec, s)  # type: ignore[arg-type]
        out.extend(rec.demos)
        if on_seed is not None:
            on_seed(s, len(rec.demos))
    return out
