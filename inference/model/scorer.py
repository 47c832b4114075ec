"""The learned scorer (issue 4 point 3, first slice): a fusion encoder over node tokens and
a policy head over (job, node) actions.

**Fusion encoder** h_t = f(s_t, q_t, G_t): node features → ``hidden``; then ``depth``
layers, each (1) aggregates neighbours over G_t (k-NN: mean of the neighbours' states;
rack/zone labels: mean over the node's group), (2) updates every node with a residual MLP
of [own state, aggregate], (3) FiLM context modulation: ``LayerNorm(h) · (1 + γ) + β`` with
γ, β from a context vector = [mean node state (the cluster summary), the mean demand of
the step's pending jobs (zeros when unknown)]. Run once per scheduling step.

**Policy head** π(a | h): for job j and node n, ``MLP(A·z_n + B·p_jn + C·e_j)`` where
``z_n`` is the node embedding (step-level), ``p_jn`` the pair features on the node's CURRENT
free capacity (:mod:`inference.features.pairs`) and ``e_j`` a job embedding. ``A·z_n`` is
precomputed once per step (:meth:`PolicyHead.precompute`), so scoring one job costs a few
``[N, hidden]`` ops and stays valid while earlier jobs of the step reserve capacity.

Not here yet (issue 4 point 3): the cost estimator ψ(h, a), the transition model T and the
self-correction signal Δ_t, the duration predictor.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from inference.features.topology import Topology
from inference.model.config import ModelConfig


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
    def __init__(self, hidden: int, context: int) -> None:
        super().__init__()
        self.update = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)
        self.film = nn.Linear(context, 2 * hidden)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, h: torch.Tensor, topo: TorchTopology, queue: torch.Tensor) -> torch.Tensor:
        h = h + self.update(torch.cat([h, topo.aggregate(h)], dim=-1))
        gamma, beta = self.film(torch.cat([h.mean(dim=1), queue], dim=-1)).chunk(2, dim=-1)
        return self.norm(h) * (1.0 + gamma[:, None]) + beta[:, None]


class FusionEncoder(nn.Module):
    def __init__(self, node_dim: int, job_dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.inp = nn.Sequential(nn.Linear(node_dim, hidden), nn.ReLU())
        self.queue = nn.Linear(job_dim, hidden)
        self.layers = nn.ModuleList(FusionLayer(hidden, 2 * hidden) for _ in range(depth))

    def forward(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor) -> torch.Tensor:
        """``nodes [B, N, node_dim]``, ``queue [B, job_dim]`` (mean pending demand) → ``[B, N, hidden]``."""
        h = self.inp(nodes)
        q = self.queue(queue)
        for layer in self.layers:
            h = layer(h, topo, q)
        return h


class PolicyHead(nn.Module):
    def __init__(self, hidden: int, job_dim: int, pair_dim: int, width: int, layers: int = 2) -> None:
        super().__init__()
        self.job = nn.Sequential(nn.Linear(job_dim, hidden), nn.ReLU(), nn.Linear(hidden, width, bias=False))
        self.node = nn.Linear(hidden, width)
        self.pair = nn.Linear(pair_dim, width, bias=False)
        deep = [nn.Linear(width, width), nn.ReLU()] if layers == 2 else []
        self.out = nn.Sequential(nn.ReLU(), *deep, nn.Linear(width, 1))

    def precompute(self, z: torch.Tensor) -> torch.Tensor:
        """The node embeddings' part of the first layer (once per step)."""
        return self.node(z)

    def score(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """``node_part [..., N, H]``, ``jobs [..., job_dim]``, ``pairs [..., N, pair_dim]`` → ``[..., N]``."""
        x = node_part + self.pair(pairs) + self.job(jobs).unsqueeze(-2)
        return self.out(x).squeeze(-1)


class Scorer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        spec = config.spec
        self.config = config
        self.encoder = FusionEncoder(spec.node_dim, spec.job_dim, config.hidden, config.depth)
        self.head = PolicyHead(config.hidden, spec.job_dim, spec.pair_dim, config.head_hidden, config.head_layers)

    def node_part(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor) -> torch.Tensor:
        """Step-level: ``[B, N, hidden]`` (encoder + the head's node projection)."""
        return self.head.precompute(self.encoder(nodes, topo, queue))

    def forward(self, nodes: torch.Tensor, topo: TorchTopology, queue: torch.Tensor, jobs: torch.Tensor,
                pairs: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """Training: one job per state. ``nodes [B, N, F]``, ``queue, jobs [B, job_dim]``,
        ``pairs [B, N, P]`` → scores ``[B, N]`` (unmasked)."""
        return self.head.score(self.node_part(nodes, topo, queue), jobs, pairs)
