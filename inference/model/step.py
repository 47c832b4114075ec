"""One scheduling step's model call, numpy in, numpy out: the contract every backend runs.

The ``learned`` policy calls its model once per scheduling step. The call is the same
whether the model runs in this process (:class:`inference.backends.InProcessBackend`) or
on a Triton server (the ``policy`` model of :mod:`inference.serving`): both build a
:class:`PolicyInputs` with :func:`build_inputs` and both evaluate it with
:func:`run_policy`, so the two can only differ by what the transport does to the arrays.

**Inputs** (the names are the Triton tensor names, lower case here):

- ``nodes`` float32 ``[N, node_dim]``: the node state s_t;
- ``neighbours`` int64 ``[N, K]`` and ``groups`` int64 ``[N]``: the topology G_t. A k-NN
  graph sets ``neighbours`` and ``groups = -1``; rack/zone labels set ``groups`` and
  ``K = 0``;
- ``queue`` float32 ``[job_dim]``: the mean demand of the step's pending jobs;
- ``jobs`` float32 ``[J, job_dim]``: the demand q_t of each job of the step;
- ``pairs`` float32 ``[S, N, pair_dim]``: pair features on the step-start free capacity, once
  per distinct resource shape;
- ``which`` int64 ``[J]``: each job's row in ``pairs``;
- ``source`` (not an array; absent only when the cluster has more GPU models than the compact
  arrays carry): the compact arrays ``pairs`` is computed from
  (:class:`~inference.features.node_arrays.NodeArrays`: capacities and free state per node, the
  distinct shapes in ``pairs``' row order; for a spec with FGD's workload columns also the
  nodes' GPU models and health). A Triton client sends these instead of ``pairs`` (~0.1 MB
  instead of ~3–4 MB at 51 shapes × 1,213 nodes) and the server computes ``pairs`` from them
  with the same code (:mod:`inference.serving.pairs`). ``pairs`` is still computed here (the
  in-process backend and in-step re-scoring read it); for such a backend, while the request is
  in flight (:class:`inference.step_call.StepCaller`).

- ``fits`` bool ``[S, N]`` (optional): the (shape, node) pairs where a job of the shape fits by
  resources (:func:`inference.features.fits.shape_fits`, a superset of what the filters accept).
  A shape-factored head scores only those (19 % of the pairs at 70 % load); the others score
  ``-inf`` (a head per (job, node) computes every pair, then sets those). Without it every pair
  is scored.

**Outputs**: ``scores`` float32 ``[J, N]`` (the decision scores, ``-inf`` where ``fits`` says the
job's shape does not fit; the filters mask the rest),
``node_part`` float32 ``[N, W]`` (the head's node term; the policy re-scores nodes that earlier
placements of the same step changed with it). Models with the optional heads add ``cost``
``[J, K, cost_dim]`` with ``cost_nodes`` int64 ``[J, K]`` (ψ on each job's ``K = COST_TOP`` best-scored
nodes; column 0 the fragmentation a placement adds, in GPUs) and, when they
damp churn at decision time (a transition model and ``stability > 0``), ``delta`` ``[J, N]``
(the self-correction signal Δ, already subtracted from ``scores`` as ``Scorer.decide`` does; computed
where ``fits`` says the job's shape fits, 0 elsewhere, where the score is ``-inf`` anyway)
and ``h`` ``[N, H]`` (the encoder's output, which in-step re-scoring needs for Δ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.encoders.base import TextEncoder
from inference.features.fits import shape_fits
from inference.features.jobs import JobRows, job_demand
from inference.features.node_arrays import NodeArrays
from inference.features.nodes import node_state
from inference.features.pair_cache import PairCache
from inference.features.pairs import Shape, pair_features_many, pair_shape
from inference.features.spec import FeatureSpec
from inference.features.topology import Topology, build_topology
from inference.model.top_nodes import top_nodes
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

#: the cost estimator ψ is evaluated on each job's this-many best-scored nodes (where the choice is
#: made), not on every (job, node): J × N evaluations would cost as much as the policy head again
COST_TOP = 8


@dataclass(frozen=True, eq=False)
class PolicyInputs:
    nodes: np.ndarray
    neighbours: np.ndarray
    groups: np.ndarray
    queue: np.ndarray
    jobs: np.ndarray
    pairs: np.ndarray | None  # None: not computed yet (``build_inputs(pairs=False)``)
    which: np.ndarray
    source: NodeArrays | None = None  # what ``pairs`` is computed from (module docstring)
    fits: np.ndarray | None = None  # bool [S, N]: the pairs the head scores (None: every pair)

    DTYPES = {"nodes": np.float32, "neighbours": np.int64, "groups": np.int64, "queue": np.float32,
              "jobs": np.float32, "pairs": np.float32, "which": np.int64}  # fmt: skip

    def arrays(self) -> dict[str, np.ndarray]:
        """The seven arrays by name, and ``fits`` when set (without ``source``)."""
        out = {name: getattr(self, name) for name in self.DTYPES}
        if self.fits is not None:
            out["fits"] = self.fits
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], source: NodeArrays | None = None) -> PolicyInputs:
        """From named arrays (a Triton request's, say), checked for names, dtypes and agreeing shapes."""
        missing = [name for name in cls.DTYPES if name not in arrays]
        if missing:
            raise ValueError(f"policy inputs missing: {', '.join(missing)}")
        a = {name: np.ascontiguousarray(arrays[name], dtype=dtype) for name, dtype in cls.DTYPES.items()}
        n = a["nodes"].shape[0]
        ok = (a["nodes"].ndim == 2 and a["neighbours"].ndim == 2 and a["neighbours"].shape[0] == n
              and a["groups"].shape == (n,) and a["queue"].ndim == 1 and a["jobs"].ndim == 2
              and a["pairs"].ndim == 3 and a["pairs"].shape[1] == n and a["which"].shape == (a["jobs"].shape[0],))  # fmt: skip
        if not ok:
            raise ValueError("policy inputs: inconsistent shapes " + str({k: v.shape for k, v in a.items()}))
        if len(a["which"]) and (a["which"].min() < 0 or a["which"].max() >= a["pairs"].shape[0]):
            raise ValueError("policy inputs: 'which' points outside 'pairs'")
        name = "neighbours" if a["neighbours"].shape[1] > 0 else "groups"  # the topology the model reads (topology())
        if a[name].size and (a[name].min() < 0 or a[name].max() >= n):  # node indices or compact group labels (found
            raise ValueError(f"policy inputs: '{name}' points outside the {n} nodes")  # by review: one request's index
            # out of range crashed the policy model's stub, and every later request failed)
        if source is not None and (source.num_nodes != n or len(source.shapes) != a["pairs"].shape[0]):
            raise ValueError("policy inputs: 'source' does not match 'nodes' and 'pairs'")
        fits = arrays.get("fits")
        if fits is not None:
            fits = np.ascontiguousarray(fits, dtype=bool)
            if fits.shape != a["pairs"].shape[:2]:
                raise ValueError(f"policy inputs: 'fits' {fits.shape} does not match 'pairs' {a['pairs'].shape}")
        return cls(**a, source=source, fits=fits)

    def topology(self) -> Topology:
        if self.neighbours.shape[1] > 0:
            return Topology("knn", None, self.neighbours)
        return Topology("labels", self.groups, None)


def step_shapes(jobs: Sequence[JobRequest], spec: FeatureSpec) -> tuple[list[JobRequest], np.ndarray]:
    """One job per distinct pair shape (the first of each, in order) and int64 ``[J]``: each job's row among them."""
    shapes: dict[Shape, int] = {}
    first: list[JobRequest] = []
    which = np.empty(len(jobs), dtype=np.int64)
    for i, job in enumerate(jobs):
        key = pair_shape(job, spec)
        if key not in shapes:
            shapes[key] = len(first)
            first.append(job)
        which[i] = shapes[key]
    return first, which


def build_inputs(snapshot: ClusterSnapshot, jobs: Sequence[JobRequest], now: float, spec: FeatureSpec,
                 encoder: TextEncoder, *, knn: int = 8, queue: np.ndarray | None = None,
                 pair_cache: PairCache | None = None, pairs: bool = True, job_rows: JobRows | None = None,
                 utilisation: np.ndarray | None = None) -> PolicyInputs:  # fmt: skip
    """The step's inputs on ``snapshot`` as it is now. ``queue``: the pending jobs' mean demand
    (default: the mean of ``jobs``' own rows, zeros for an empty step). ``pair_cache``: keeps the
    pair features between steps (the same values, only the changed nodes recomputed); ``job_rows``
    the job rows (only the new jobs' computed whole). ``source``
    is set unless the cluster has more GPU models than the compact arrays carry (module docstring).
    ``pairs=False``: ``pairs`` is left ``None`` when there is a ``source`` (for a backend that
    computes them from it; :func:`pair_rows` computes this process's copy meanwhile).
    ``utilisation``: float ``[N]``, each node's mean utilisation (0..1) over the worker's hopping
    window, for a spec with that column (:func:`~inference.features.nodes.node_state`; 0 without)."""
    first, which = step_shapes(jobs, spec)
    n = snapshot.num_nodes
    rows_of = (job_rows or job_demand)(jobs, now, spec, encoder)
    if queue is None:
        queue = rows_of.mean(axis=0) if len(jobs) else np.zeros(spec.job_dim, np.float32)
    try:  # what a Triton server computes the pairs from (module docstring)
        source: NodeArrays | None = NodeArrays.of(snapshot, first, fgd=bool(spec.workload))
    except ValueError:  # more GPU models than the compact arrays carry: the request sends the pairs
        source = None
    rows: np.ndarray | None = None
    if pair_cache is not None and (pairs or source is None):
        rows, fits = pair_cache.pairs_and_room(first, snapshot, spec)
    else:
        rows = pair_rows(first, snapshot, spec) if pairs or source is None else None
        fits = shape_fits(first, snapshot, spec)
    topo = build_topology(snapshot, spec, knn)
    if topo.kind == "knn":
        assert topo.neighbours is not None
        neighbours, groups = topo.neighbours, np.full(n, -1, dtype=np.int64)
    else:
        assert topo.groups is not None
        neighbours, groups = np.zeros((n, 0), dtype=np.int64), topo.groups
    return PolicyInputs(nodes=node_state(snapshot, spec, utilisation), neighbours=neighbours, groups=groups,
                        queue=np.asarray(queue, np.float32), jobs=rows_of, pairs=rows, which=which,
                        source=source, fits=fits)  # fmt: skip


def pair_rows(shape_jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, spec: FeatureSpec,
              pair_cache: PairCache | None = None) -> np.ndarray:  # fmt: skip
    """float32 ``[S, N, pair_dim]``: the pair features of one job per shape (:func:`step_shapes`)."""
    if pair_cache is None:
        return pair_features_many(shape_jobs, snapshot, spec)
    return pair_cache.pairs(shape_jobs, snapshot, spec)


class TopologyCache:
    """Torch topology tensors by content (a server sees the same node table step after step),
    on the model's device."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: dict[tuple[int, bytes, bytes, str], Any] = {}

    def get(self, inputs: PolicyInputs, device: Any = "cpu") -> Any:
        import torch

        from inference.model.scorer import TorchTopology

        key = (len(inputs.nodes), inputs.neighbours.tobytes(), inputs.groups.tobytes(), str(device))
        topo = self._items.get(key)
        if topo is None:
            if len(self._items) >= self.size:
                self._items.pop(next(iter(self._items)))
            topo = TorchTopology(inputs.topology())
            for name, value in list(vars(topo).items()):  # its index tensors, to the model's device
                if isinstance(value, torch.Tensor):
                    setattr(topo, name, value.to(device))
            self._items[key] = topo
        return topo


def run_policy(model: Any, inputs: PolicyInputs, topologies: TopologyCache | None = None) -> dict[str, np.ndarray]:
    """Evaluate the scorer (:class:`inference.model.scorer.Scorer`) on one step's inputs."""
    import torch

    device = next(model.parameters()).device  # CPU here; CUDA where the server has a GPU
    head = model.head

    def t(a: np.ndarray) -> Any:
        return torch.from_numpy(a).to(device)

    extra: dict[str, Any] = {}
    with torch.inference_mode():
        h = encode_step(model, inputs, topologies)
        node_part = head.precompute(h)
        n, jobs = node_part.shape[0], t(inputs.jobs)
        if len(inputs.jobs):
            which = t(inputs.which)
            fits = None if inputs.fits is None else t(inputs.fits)
            scores = head.step_scores(node_part, jobs, t(inputs.pairs), which, fits)
            if stability(model):  # Scorer.decide: damp actions predicted to move the representation
                delta = model.step_delta(h, jobs, t(inputs.pairs), which, fits)  # the fitting pairs only
                scores = scores - model.config.stability * delta
                extra["delta"], extra["h"] = delta, h
            if getattr(model, "cost_head", None) is not None:  # ψ for each job's COST_TOP best-scored nodes
                k = min(COST_TOP, n)
                top = top_nodes(scores, k)  # [J, k]
                pairs_top = t(inputs.pairs)[which[:, None], top]  # [J, k, P]
                extra["cost"] = model.cost(node_part[top], jobs, pairs_top)
                extra["cost_nodes"] = top
        else:
            scores = node_part.new_zeros((0, n))
            if stability(model):
                extra["delta"], extra["h"] = node_part.new_zeros((0, n)), h
            if getattr(model, "cost_head", None) is not None:
                k = min(COST_TOP, n)
                extra["cost"] = node_part.new_zeros((0, k, model.config.cost_dim))
                extra["cost_nodes"] = torch.zeros((0, k), dtype=torch.long, device=device)
    out = {"scores": scores, "node_part": node_part, **extra}
    return {k: v.cpu().numpy().astype(np.int64 if k == "cost_nodes" else np.float32, copy=False)
            for k, v in out.items()}  # fmt: skip


def encode_step(model: Any, inputs: PolicyInputs, topologies: TopologyCache | None = None) -> Any:
    """h_t ``[N, H]`` (a torch tensor on the model's device): the fusion encoder on one step's inputs."""
    import torch

    device = next(model.parameters()).device
    topo = (topologies or TopologyCache(1)).get(inputs, device)
    with torch.inference_mode():
        nodes, queue = torch.from_numpy(inputs.nodes).to(device), torch.from_numpy(inputs.queue).to(device)
        tokens = torch.from_numpy(inputs.jobs).to(device)[None]  # the step's pending jobs (models with job tokens)
        return model.encode(nodes[None], topo, queue[None], tokens)[0]


def cost_at(model: Any, node_part: np.ndarray, job_row: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """float32 ``[cost_dim]``: ψ of one (job, node) from the node's ``node_part`` row, the job's row and
    its pair features there (what ``run_policy`` computes for each job's best-scored nodes); in numpy
    where :mod:`inference.model.numpy_head` mirrors the cost head (torch's per-call cost is most of
    one node's work)."""
    import torch

    from inference.model.numpy_head import numpy_cost

    fast = numpy_cost(getattr(model, "cost_head", None))
    if fast is not None:
        return fast.cost(np.asarray(node_part, np.float32)[None], np.asarray(job_row, np.float32),
                         np.asarray(pair, np.float32)[None])[0]  # fmt: skip
    device = next(model.parameters()).device

    def t(a: np.ndarray) -> Any:  # a copy (a few hundred floats): a Triton answer's arrays are read-only
        return torch.tensor(a, dtype=torch.float32, device=device)

    with torch.inference_mode():  # one node: [1, W], the job [Dj], its pair row [1, P]
        out = model.cost(t(node_part)[None], t(job_row), t(pair)[None])
    return out[0].cpu().numpy().astype(np.float32, copy=False)


def stability(model: Any) -> float:
    """The weight of Δ at decision time (0 without a transition model)."""
    if getattr(model, "transition_head", None) is None:
        return 0.0
    return float(getattr(model.config, "stability", 0.0) or 0.0)


def score_nodes(model: Any, node_part: np.ndarray, job_row: np.ndarray, pairs: np.ndarray,
                h: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """float32 ``[M]``: the decision scores on ``M`` nodes for one job — ``node_part [M, W]`` (rows of
    a step's ``node_part`` output), ``pairs [M, pair_dim]`` on the nodes' current free capacity and,
    for a model that damps churn, ``h [M, H]`` (rows of the step's ``h``). Used within a step for
    the nodes earlier placements changed (the rest keep their step scores), in numpy where
    :mod:`inference.model.numpy_head` mirrors the head (torch's per-call cost is most of a few
    nodes' work)."""
    import torch

    from inference.model.numpy_head import numpy_head

    fast = None if stability(model) else numpy_head(model.head)
    if fast is not None:
        return fast.score(node_part, job_row, pairs)
    device = next(model.parameters()).device

    def t(a: np.ndarray) -> Any:
        return torch.from_numpy(a).to(device)

    with torch.inference_mode():
        scores = model.head.score(t(node_part), t(job_row), t(pairs))
        if stability(model):
            if h is None:
                raise ValueError("this model damps churn (stability > 0): pass the step's h rows")
            scores = scores - model.config.stability * model.delta(t(h), t(job_row), t(pairs))
        return scores.cpu().numpy().astype(np.float32, copy=False)
