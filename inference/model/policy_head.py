"""The policy head π(a | h): a score for every (job, node) action.

Two heads share one interface — ``precompute(z)`` once per step on the node embeddings,
``score(node_part, jobs, pairs)`` for one job (or a batch of jobs) against every node, and
``step_scores(node_part, jobs, pairs, which)`` for a whole step (``pairs`` once per distinct job
shape, ``which`` each job's row in it):

- :class:`PolicyHead` (``ModelConfig.head_rank = 0``, the first models): ``MLP(A·z_n + B·p_jn +
  C·e_j)`` — the nonlinearity runs on every (job, node), so a step costs pending × nodes ×
  width: 46 ms for 256 pending × 1,213 nodes at width 16 on this machine's CPU.
- :class:`ShapeFactoredHead` (``head_rank = R > 0``): the nonlinearity runs once per (job
  SHAPE, node) and the job's own features (its text, priority, time waited, QoS) enter through
  ``R`` coefficients::

      u_sn  = MLP(A·z_n + B·p_sn + D·r_s)   → [1 + R] outputs (b_sn, f_sn1 … f_snR)
      c_j   = MLP_job(e_j)                  → [R]
      score = b_{s_j n} + Σ_r c_jr · f_{s_j n r}

  where ``s_j`` is job j's shape (its resources: :data:`inference.features.spec.SHAPE_COLUMNS`
  leading job columns, which is all the pair features depend on) and ``r_s`` those columns.
  A step with S shapes costs S × nodes × width plus one ``[J, N, 1 + R]`` contraction: the
  pending jobs of a real queue share few shapes (51 among 256 openb pods).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from inference.features.spec import SHAPE_COLUMNS


def _mlp_out(width: int, layers: int, outputs: int, inplace: bool = False) -> nn.Sequential:
    """ReLU, [Linear, ReLU], Linear; ``inplace``: the ReLUs overwrite their input (same parameters
    and state-dict keys — for a caller whose input is a fresh tensor)."""
    deep = [nn.Linear(width, width), nn.ReLU(inplace)] if layers == 2 else []
    return nn.Sequential(nn.ReLU(inplace), *deep, nn.Linear(width, outputs))


class PolicyHead(nn.Module):
    def __init__(self, hidden: int, job_dim: int, pair_dim: int, width: int, layers: int = 2) -> None:
        super().__init__()
        self.job = nn.Sequential(nn.Linear(job_dim, hidden), nn.ReLU(), nn.Linear(hidden, width, bias=False))
        self.node = nn.Linear(hidden, width)
        self.pair = nn.Linear(pair_dim, width, bias=False)
        self.out = _mlp_out(width, layers, 1)

    def precompute(self, z: torch.Tensor) -> torch.Tensor:
        """The node embeddings' part of the first layer (once per step)."""
        return self.node(z)

    def score(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """``node_part [..., N, H]``, ``jobs [..., job_dim]``, ``pairs [..., N, pair_dim]`` → ``[..., N]``."""
        x = node_part + self.pair(pairs) + self.job(jobs).unsqueeze(-2)
        return self.out(x).squeeze(-1)

    def step_scores(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor,
                    which: torch.Tensor, fits: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """A step: ``node_part [N, W]``, ``jobs [J, job_dim]``, ``pairs [S, N, P]`` (per shape),
        ``which [J]`` → ``[J, N]``; ``-inf`` outside ``fits`` (bool ``[S, N]``) when given (this head
        computes every pair anyway)."""
        base = node_part + self.pair(pairs)  # [S, N, W]
        scores = self.out(base[which] + self.job(jobs).unsqueeze(1)).squeeze(-1)
        return scores if fits is None else scores.masked_fill_(~fits[which], float("-inf"))


class ShapeFactoredHead(nn.Module):
    def __init__(self, hidden: int, job_dim: int, pair_dim: int, width: int, layers: int, rank: int) -> None:
        super().__init__()
        if rank < 1:
            raise ValueError("the shape-factored head needs rank >= 1")
        self.rank = rank
        self.node = nn.Linear(hidden, width)
        self.pair = nn.Linear(pair_dim, width, bias=False)
        self.shape = nn.Linear(SHAPE_COLUMNS, width, bias=False)
        self.out = _mlp_out(width, layers, 1 + rank, inplace=True)  # (table() hands it a fresh tensor)
        self.job = nn.Sequential(nn.Linear(job_dim, hidden), nn.ReLU(), nn.Linear(hidden, rank))

    def precompute(self, z: torch.Tensor) -> torch.Tensor:
        return self.node(z)

    def table(self, node_part: torch.Tensor, shape_rows: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """``[..., N, 1 + R]``: the per-(shape, node) outputs (b, f_1 … f_R) for ``shape_rows [..., SHAPE_COLUMNS]``."""
        x = self.pair(pairs)  # fresh: the sums and the first ReLU work in place (a step's table is 1M floats)
        return self.out(x.add_(node_part).add_(self.shape(shape_rows).unsqueeze(-2)))

    def coefficients(self, jobs: torch.Tensor) -> torch.Tensor:
        """``[..., 1 + R]``: (1, c_1 … c_R) of each job."""
        c = self.job(jobs)
        return torch.cat([torch.ones_like(c[..., :1]), c], dim=-1)

    def score(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        table = self.table(node_part, jobs[..., :SHAPE_COLUMNS], pairs)  # [..., N, 1 + R]
        return (table * self.coefficients(jobs).unsqueeze(-2)).sum(-1)

    def step_scores(self, node_part: torch.Tensor, jobs: torch.Tensor, pairs: torch.Tensor,
                    which: torch.Tensor, fits: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """``[J, N]``; with ``fits`` (bool ``[S, N]``) only the pairs it marks, ``-inf`` elsewhere."""
        s, n = pairs.shape[:2]
        shape_rows = jobs.new_zeros(s, SHAPE_COLUMNS)
        shape_rows[which] = jobs[:, :SHAPE_COLUMNS]  # the jobs of one shape have the same columns
        if fits is None:
            table = self.table(node_part, shape_rows, pairs).permute(2, 0, 1)  # [1 + R, S, N]
        else:
            table = self._fitting_table(node_part, shape_rows, pairs, fits)
        coeff = self.coefficients(jobs)  # [J, 1 + R]
        k = table.shape[0]
        if not len(jobs):
            return coeff.new_zeros((0, n))
        # job j's scores: the sum of its shape's 1 + R rows of table [(1 + R)·S, N], weighted by its
        # coefficients — an embedding bag (one fused gather-and-sum): gathering table[which] first
        # would materialise [J, N, 1 + R] (1.4 ms at 256 pending × 1,213 nodes), a sparse CSR product
        # zero-fills and copies its [J, N] result (1.3 ms against the bag's 0.38 on cold caches;
        # 0.25 ms less a step in an A/B of the whole model call)
        rows = torch.arange(k, device=coeff.device) * s + which[:, None]  # [J, 1 + R]
        return F.embedding_bag(rows, table.reshape(k * s, n), per_sample_weights=coeff, mode="sum")

    def _fitting_table(self, node_part: torch.Tensor, shape_rows: torch.Tensor, pairs: torch.Tensor,
                       fits: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """``[1 + R, S, N]``: :meth:`table`, transposed, computed on the fitting (shape, node) pairs only
        (each the same as the whole table's: 0.6 ms instead of 1.0 at 51 shapes × 1,213 nodes, 19 %
        fitting). Elsewhere b = ``-inf`` and f = 0, so a job's score there is ``-inf`` (its coefficient
        of b is 1): no mask over ``[J, N]`` afterwards."""
        s, n, p = pairs.shape
        flat = fits.reshape(-1).nonzero().squeeze(1)  # [M] (shape, node) pairs, as shape * n + node
        x = self.pair(pairs.reshape(s * n, p).index_select(0, flat))  # fresh: the sums and the ReLU work in place
        x.add_(node_part.index_select(0, flat % n)).add_(self.shape(shape_rows).index_select(0, flat // n))
        rows = self.out(x)  # [M, 1 + R]
        table = rows.new_zeros(rows.shape[1], s * n)
        table[0].fill_(float("-inf"))
        return table.index_copy_(1, flat, rows.t()).view(-1, s, n)


def make_head(hidden: int, job_dim: int, pair_dim: int, width: int, layers: int, rank: int) -> nn.Module:
    """The head ``ModelConfig.head_rank`` asks for (0: :class:`PolicyHead`)."""
    if rank:
        return ShapeFactoredHead(hidden, job_dim, pair_dim, width, layers, rank)
    return PolicyHead(hidden, job_dim, pair_dim, width, layers)
