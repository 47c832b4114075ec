"""The learned scorer (issue 4 point 3, first slice): a fusion encoder over node tokens and
a policy head over (job, node) actions.

**Fusion encoder** h_t = f(s_t, q_t, G_t): node features → ``hidden``; then ``depth``
layers, each (1) aggregates neighbours over G_t (k-NN: mean of the neighbours' states;
rack/zone labels: mean over the node's group), (2) updates every node with a residual MLP
of [own state, aggregate], (3) FiLM context modulation: ``LayerNorm(h) · (1 + γ) + β`` with
γ, β from a context vector = [mean node state (the cluster summary), the mean demand of
the step's pending jobs (zeros when unknown)]. With ``ModelConfig.job_tokens`` = S > 0 the
pending jobs are also tokens: pooled by attention into S summaries that every node attends to
in each layer, after (2) (:mod:`inference.model.job_tokens`). Run once per scheduling step.

**Policy head** π(a | h): for job j and node n, ``MLP(A·z_n + B·p_jn + C·e_j)`` where
``z_n`` is the node embedding (step-level), ``p_jn`` the pair features on the node's CURRENT
free capacity (:mod:`inference.features.pairs`) and ``e_j`` a job embedding. ``A·z_n`` is
precomputed once per step (:meth:`PolicyHead.precompute`), so scoring one job costs a few
``[N, hidden]`` ops and stays valid while earlier jobs of the step reserve capacity. With
``ModelConfig.head_rank > 0`` the nonlinearity runs per job SHAPE instead of per job
(:mod:`inference.model.policy_head`).

**Optional heads** (``ModelConfig.cost_dim`` / ``transition``; absent in old model dirs):

- cost estimator ψ(h, a) (:class:`CostHead`, :meth:`Scorer.cost`): ``[..., N, cost_dim]`` per
  (job, node) from the policy head's node term, the job and the pair features — trained as an
  auxiliary regression on the fragmentation each placement adds (column 0, in GPUs) and, with a
  second column, on the job's recorded run time (``log(1 + s)``, at nominal node speed: the
  placement's expected completion time is its start plus that);
- transition model T (:class:`TransitionHead`, :meth:`Scorer.transition`):
  ``h_{t+1} = T(h_t, a_t)`` — the acted node's embedding gets a local update, every node a
  global one (the context the action changes); trained on consecutive states against the
  encoder's embedding of the next state (stop-gradient target);
- self-correction Δ(h, a) = ‖T(h, a) − h‖ restricted to the acted node plus the global part
  (:meth:`Scorer.delta`, ``[..., N]`` for every candidate node at once): how much an action is
  predicted to move the representation. Training adds ``E_π[Δ]`` as a regulariser (damps
  churn); at decision time :meth:`Scorer.decide` = score − ``stability`` · Δ.

The duration predictor is :mod:`inference.duration`.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch import nn

from inference.features.topology import Topology
from inference.model.config import ModelConfig
from inference.model.job_tokens import JobTokens, SlotAttention
from inference.model.policy_head import PolicyHead, ShapeFactoredHead, make_head


class Action(NamedTuple):
    """One action per state: ``job [B, job_dim]``, ``node [B]`` (long), ``pair [B, pair_dim]`` (its pair row)."""

    job: torch.Tensor
    node: torch.Tensor
    pair: torch.Tensor


class TorchTopology:
    """G_t as torch index tensors (built once per node table)."""

    def __init__(self, topology: Topology) -> None:
        self.kind = topology.kind
        if topology.kind == "labels":
            assert topology.groups is not None
            self.groups = torch.as_tensor(topology.groups, dtype=torch.long)
            self.num_groups = int(self.groups.max().item()) + 1 if len(self.groups) else 0
            counts = torch.bincount(self.groups, minlength=self.num_groups).clamp(min=1)
            self.inv_counts = (1.0 / counts.float())[:, None]
        else:  # the neighbour mean as a row-normalised sparse matrix: 5x faster than a gather + mean
            assert topology.neighbours is not None
            nbr = torch.as_tensor(topology.neighbours, dtype=torch.long)
            n, k = nbr.shape
            rows = torch.arange(n).repeat_interleave(k)
            self.mean = torch.sparse_coo_tensor(torch.stack([rows, nbr.reshape(-1)]), torch.full((n * k,), 1.0 / k),
                                                (n, n), check_invariants=False).coalesce()  # fmt: skip
            with warnings.catch_warnings():  # "sparse CSR support is in beta"
                warnings.simplefilter("ignore", UserWarning)
                self.mean_csr = self.mean.to_sparse_csr()

    def aggregate(self, h: torch.Tensor) -> torch.Tensor:
        """``[B, N, H]`` → the mean of each node's neighbours ``[B, N, H]``."""
        if self.kind == "labels":
            sums = h.new_zeros(h.shape[0], self.num_groups, h.shape[2]).index_add_(1, self.groups, h)
            return (sums * self.inv_counts)[:, self.groups]
        b, n, width = h.shape
        x = h.permute(1, 0, 2).reshape(n, b * width)
        m = self.mean if torch.is_grad_enabled() and h.requires_grad else self.mean_csr
        return torch.sparse.mm(m, x).reshape(n, b, width).permute(1, 0, 2)


class FusionLayer(nn.Module):
    def __init__(self, hidden: int, context: int, tokens: bool = False) -> None:
        super().__init__()
        self.update = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.attend = SlotAttention(hidden) if tokens else None
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)
        self.film = nn.Linear(context, 2 * hidden)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, h: torch.Tensor, topo: TorchTopology, queue: torch.Tensor,
                slots: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        h = h + self.update(torch.cat([h, topo.aggregate(h)], dim=-1))
        if self.attend is not None and slots is not None:
            h = self.attend(h, slots)
        gamma, beta = self.film(torch.cat([h.mean(dim=1), queue], dim=-1)).chunk(2, dim=-1)
        return self.norm(h) * (1.0 + gamma[:, None]) + beta[:, None]


class FusionEncoder(nn.Module):
    def __init__(self, node_dim: int, job_dim: int, hidden: int, depth: int, job_tokens: int = 0) -> None:
        super().__init__()
        self.inp = nn.Sequential(nn.Linear(node_dim, hidden), nn.ReLU())
        self.queue = nn.Linear(job_dim, hidden)
        self.tokens = JobTokens(job_dim, hidden, job_tokens) if job_tokens else None
        self.layers = nn.ModuleList(FusionLayer(hidden, 2 * hidden, bool(job_tokens)) for _ in range(depth))

    def forward(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor, jobs: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """``nodes [B, N, node_dim]``, ``queue [B, job_dim]`` (mean pending demand) and, for a model with
        job tokens, the pending jobs ``jobs [B, J, job_dim]`` (``mask [B, J]``: which are real; ``None``:
        no jobs) → ``[B, N, hidden]``."""
        h = self.inp(nodes)
        q = self.queue(queue)
        slots = None
        if self.tokens is not None:
            if jobs is None:
                jobs = nodes.new_zeros((nodes.shape[0], 0, queue.shape[-1]))
            slots = self.tokens(jobs, mask)
        for layer in self.layers:
            h = layer(h, topo, q, slots)
        return h


class CostHead(nn.Module):
    """ψ(h, a): ``MLP(node_part + P·p_jn + J·e_j) → cost_dim`` (reuses the policy head's node term)."""

    def __init__(self, job_dim: int, pair_dim: int, width: int, cost_dim: int) -> None:
        super().__init__()
        self.job = nn.Linear(job_dim, width, bias=False)
        self.pair = nn.Linear(pair_dim, width)
        self.out = nn.Sequential(nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, cost_dim))

    def forward(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        return self.out(node_part + self.pair(pairs) + self.job(jobs).unsqueeze(-2))


class TransitionHead(nn.Module):
    """T(h, a) for a = (job j, node n): ``u = relu(H·h_n + J·e_j + P·p_jn)``; the node's update
    ``L·u`` and a global update ``G·u`` added to every node."""

    def __init__(self, hidden: int, job_dim: int, pair_dim: int) -> None:
        super().__init__()
        self.node = nn.Linear(hidden, hidden)
        self.job = nn.Linear(job_dim, hidden, bias=False)
        self.pair = nn.Linear(pair_dim, hidden, bias=False)
        self.local = nn.Linear(hidden, hidden)
        self.glob = nn.Linear(hidden, hidden)

    def start_as_no_change(self) -> None:
        """Zero the update layers: T(h, a) = h and Δ = 0 until trained, as residual branches are
        zero-initialised. Training calls it on a new model (an untrained one keeps random updates, so
        the tests of T's arithmetic are not of zeros). A placement moves the representation little
        (about 5e-4 a node in the fill states); from random updates, 12 epochs left T worse than
        predicting no change at all (2.2 times its error on the validation states)."""
        with torch.no_grad():
            for layer in (self.local, self.glob):
                layer.weight.zero_()
                layer.bias.zero_()

    def updates(self, h: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``h [..., N, H]``, ``jobs [..., job_dim]``, ``pairs [..., N, P]`` → (local, global) updates
        ``[..., N, H]`` each, for every node as the action's node."""
        u = torch.relu(self.node(h) + self.pair(pairs) + self.job(jobs).unsqueeze(-2))
        return self.local(u), self.glob(u)


def _delta_norm(local: torch.Tensor, glob: torch.Tensor) -> torch.Tensor:
    """Δ from T's (local, global) updates: ``sqrt(‖local + global‖² + ‖global‖²)`` (the last dimension)."""
    return torch.sqrt(((local + glob) ** 2).sum(-1) + (glob**2).sum(-1) + 1e-12)


class Scorer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        spec = config.spec
        self.config = config
        self.encoder = FusionEncoder(spec.node_dim, spec.job_dim, config.hidden, config.depth, config.job_tokens)
        self.head: PolicyHead | ShapeFactoredHead = make_head(config.hidden, spec.job_dim, spec.pair_dim,
                                                               config.head_hidden, config.head_layers, config.head_rank)
        self.cost_head = CostHead(spec.job_dim, spec.pair_dim, config.head_hidden, config.cost_dim) \
            if config.cost_dim else None  # fmt: skip
        self.transition_head = TransitionHead(config.hidden, spec.job_dim, spec.pair_dim) \
            if config.transition else None  # fmt: skip

    def encode(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor, tokens: torch.Tensor | None = None,
               token_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """h_t ``[B, N, hidden]`` (the fusion encoder; ``tokens [B, J, job_dim]``: the pending jobs, for a
        model with job tokens); ``head.precompute(h)`` is :meth:`node_part`."""
        return self.encoder(nodes, topo, queue, tokens, token_mask)

    def node_part(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor, tokens: torch.Tensor | None = None,
                  token_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Step-level: ``[B, N, hidden]`` (encoder + the head's node projection)."""
        return self.head.precompute(self.encoder(nodes, topo, queue, tokens, token_mask))

    def forward(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor, jobs: torch.Tensor,
                pairs: torch.Tensor, tokens: torch.Tensor | None = None,
                token_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Training: one job per state. ``nodes [B, N, F]``, ``queue, jobs [B, job_dim]``,
        ``pairs [B, N, P]`` → scores ``[B, N]`` (unmasked). ``tokens``: the pending jobs per state
        (default: the state's one job)."""
        if tokens is None and self.encoder.tokens is not None:
            tokens = jobs[:, None]
        return self.head.score(self.node_part(nodes, topo, queue, tokens, token_mask), jobs, pairs)

    # -- the optional heads --------------------------------------------------------------------
    def cost(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """ψ: ``node_part [..., N, W]`` (:meth:`node_part`), ``jobs [..., job_dim]``, ``pairs [..., N, P]``
        → ``[..., N, cost_dim]``; column 0 = fragmentation the placement adds, in GPUs; column 1 (if
        any) = the job's expected run time there, ``log(1 + s)`` (trained at nominal node speed)."""
        if self.cost_head is None:
            raise ValueError("this model has no cost head (ModelConfig.cost_dim = 0)")
        return self.cost_head(node_part, jobs, pairs)

    def transition(self, h: torch.Tensor, action: Action) -> torch.Tensor:
        """T: ``h [B, N, H]`` (:meth:`encode`) and one action per state → the predicted ``h_{t+1}``."""
        t = self._transition_head()
        b = torch.arange(h.shape[0])
        h_n = h[b, action.node][:, None]  # [B, 1, H]
        local, glob = t.updates(h_n, action.job, action.pair[:, None])
        out = h + glob
        return out.index_put((b, action.node), out[b, action.node] + local[:, 0])

    def delta(self, h: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Δ for every candidate node: ``h [..., N, H]``, ``jobs [..., job_dim]``, ``pairs [..., N, P]``
        → ``[..., N]`` = ``sqrt(‖local + global‖² + ‖global‖²)`` — T(h, a) − h at the acted node,
        plus the shift T gives every other node."""
        return _delta_norm(*self._transition_head().updates(h, jobs, pairs))

    def step_delta(self, h: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor, which: torch.Tensor,
                   fits: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Δ for a step (what ``run_policy`` subtracts): ``h [N, H]``, ``jobs [J, job_dim]``, ``pairs [S, N, P]``
        (per shape), ``which [J]`` (each job's shape) → ``[J, N]``, the same values as :meth:`delta` on
        ``h`` repeated per job, computed only on the pairs where ``fits`` (bool ``[S, N]``; ``None``:
        every pair) says the job's shape fits, and 0 elsewhere (the head scores those ``-inf``).
        :meth:`delta` per job would project h once per job and Δ on every pair (J × N × H × H; 215-224 ms
        at 256 jobs × 1,213 nodes, hidden 32, against the promotion gate's 100 ms: ``semsched bench damping``): here T's node
        projection runs once per node, its pair projection once per fitting (shape, node) row and its
        job projection once per job, and only the fitting pairs go through the rest."""
        t = self._transition_head()
        n, s = h.shape[0], pairs.shape[0]
        if fits is None:
            fits = torch.ones(s, n, dtype=torch.bool, device=h.device)
        job, node = fits[which].nonzero(as_tuple=True)  # [M] each: the pairs Δ is computed on
        rows = fits.reshape(-1).nonzero().squeeze(1)  # the fitting (shape, node) rows, as shape * n + node
        at = torch.full((s * n,), -1, dtype=torch.long, device=h.device)
        at[rows] = torch.arange(len(rows), device=h.device)
        pair = t.pair(pairs.reshape(s * n, -1).index_select(0, rows))  # [rows, H]
        u = torch.relu(t.node(h)[node] + pair[at[which[job] * n + node]] + t.job(jobs)[job])  # as in updates()
        out = h.new_zeros(len(jobs), n)
        return out.index_put_((job, node), _delta_norm(t.local(u), t.glob(u)))

    def decide(self, h: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Decision scores ``[..., N]``: the policy head's, minus ``config.stability`` · Δ when the
        model has a transition head (else just the policy head's)."""
        scores = self.head.score(self.head.precompute(h), jobs, pairs)
        if self.transition_head is None or not self.config.stability:
            return scores
        return scores - self.config.stability * self.delta(h, jobs, pairs)

    def _transition_head(self) -> TransitionHead:
        if self.transition_head is None:
            raise ValueError("this model has no transition head (ModelConfig.transition = False)")
        return self.transition_head
