"""The step's pending jobs as tokens of the fusion encoder (issue 4 point 3: "attention or a graph
network over nodes and job tokens").

:class:`JobTokens` embeds each pending job's feature row (resources, QoS, priority, time waited,
duration estimate and its text embedding: :func:`inference.features.jobs.job_demand`) and pools
the set by attention into ``slots`` learned summaries (a Set Transformer's pooling by multihead
attention with one head: any number of jobs, in any order, gives ``slots`` vectors; a step
without jobs gives zeros). :class:`SlotAttention` lets every node attend to those summaries in
each fusion layer, a residual whose output projection starts at zero, so a new model begins as
the encoder without tokens and learns how much of the queue to read.

The arithmetic is small beside the encoder's: ``J × hidden`` for the embedding, ``(J + N) ×
slots × hidden`` for the two attentions (256 pending × 1,213 nodes × 4 slots × 32: about 0.2 M
multiply-adds a layer). Measured, a step at 256 pending × 1,213 nodes takes 0.2–1.3 ms more,
mostly torch's cost per call of the added small operations.

Training (:mod:`inference.training.imitation`) records one decision per state; its tokens are
the decided job and the next ``L − 1`` jobs recorded in the same run, ``L`` drawn from
1..``TrainOptions.token_window`` per state: one token, as a fill benchmark step has, up to the
pods that come next standing in for a queue. In a worker's step they are the jobs of the model
call's window (the first jobs of the step's order that fit on some node, up to
``SEMSCHED_MODEL_WINDOW``: :mod:`inference.step_windows`).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class JobTokens(nn.Module):
    def __init__(self, job_dim: int, hidden: int, slots: int) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(job_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.seeds = nn.Parameter(torch.randn(slots, hidden) / math.sqrt(hidden))
        self.scale = 1.0 / math.sqrt(hidden)

    def forward(self, jobs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``jobs [B, J, job_dim]`` (``mask [B, J]``: which are real) → the slots ``[B, slots, hidden]``."""
        e = self.embed(jobs)  # [B, J, H]
        logits = torch.einsum("sh,bjh->bsj", self.seeds, e) * self.scale
        if mask is not None:
            logits = logits.masked_fill(~mask[:, None, :], float("-inf"))
        weights = torch.nan_to_num(torch.softmax(logits, dim=-1))  # a row of only padding: 0, not NaN
        return weights @ e


class SlotAttention(nn.Module):
    """Nodes attend to the job slots: ``h + O·softmax(Q·h (K·slots)ᵀ / √H) V·slots`` (``O`` starts at 0)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.scale = 1.0 / math.sqrt(hidden)

    def forward(self, h: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """``h [B, N, H]``, ``slots [B, S, H]`` → ``[B, N, H]``. The products are grouped so that
        nothing ``N × H × H`` is computed: ``Q·h · (K·s)ᵀ = h · (Qᵀ K·s)ᵀ`` and ``O·(attn · V·s) =
        attn · (O·V·s)``; the softmax runs over the slots of an ``[S, N]`` layout (torch's softmax
        over a last dimension of 4 costs ~0.1 ms at 1,213 nodes). 0.3 ms less a step at 256 pending
        × 1,213 nodes, the same values to float rounding."""
        slots = slots.expand(h.shape[0], -1, -1)  # one set of slots for a batch of states: broadcast
        queries = (self.k(slots) @ self.q.weight) * self.scale  # [B, S, H]: Qᵀ K·s_i (Q has no bias), scaled
        attn = torch.softmax(queries @ h.transpose(1, 2), dim=1)  # [B, S, N], over the slots
        return torch.baddbmm(h + self.out.bias, attn.transpose(1, 2), F.linear(self.v(slots), self.out.weight))
