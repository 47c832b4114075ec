"""Imitation learning: fit the scorer to an expert's choices (issue 4 point 4, first stage).

Loss: listwise cross-entropy over the feasible nodes of each recorded state, with the
expert's target SET as the positive class — ``logsumexp(scores[feasible]) −
logsumexp(scores[target])``, the negative log of the probability the softmax policy puts on
any of the expert's best nodes (FGD ties often; see :mod:`inference.training.collect`).
Agreement = share of states whose argmax over feasible nodes is in the target set.

Deterministic given ``seed`` (torch and numpy seeded, one thread order of batches).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from inference.features.topology import build_topology
from inference.model.config import ModelConfig
from inference.model.scorer import Scorer, TorchTopology
from inference.training.collect import Demonstrations


@dataclass
class TrainOptions:
    epochs: int = 8
    batch: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-5
    seed: int = 0


@dataclass
class TrainHistory:
    loss: list[float] = field(default_factory=list)  # mean training loss per epoch
    agreement: list[float] = field(default_factory=list)  # training agreement per epoch (during the epoch)
    val_loss: list[float] = field(default_factory=list)
    val_agreement: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"loss": self.loss, "agreement": self.agreement, "val_loss": self.val_loss,
                "val_agreement": self.val_agreement, "seconds": self.seconds}  # fmt: skip


def listwise_loss(scores: torch.Tensor, feasible: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per state: ``logsumexp(scores | feasible) − logsumexp(scores | target)`` (``[B]``)."""
    neg = torch.finfo(scores.dtype).min
    return (torch.logsumexp(scores.masked_fill(~feasible, neg), dim=1)
            - torch.logsumexp(scores.masked_fill(~target, neg), dim=1))  # fmt: skip


def agreement(scores: torch.Tensor, feasible: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per state: whether the argmax over feasible nodes is one of the expert's best."""
    pick = scores.masked_fill(~feasible, float("-inf")).argmax(dim=1)
    return target.gather(1, pick[:, None])[:, 0]


class _Data:
    """The demonstrations as tensors, batched within one node table (one topology) at a time."""

    def __init__(self, demos: Demonstrations, config: ModelConfig) -> None:
        a = demos.arrays()
        self.t = {k: torch.from_numpy(v) for k, v in a.items()}
        self.group = np.asarray(demos.group)
        self.topos = [TorchTopology(build_topology(s, config.spec, config.knn)) for s in demos.snapshots]

    def __len__(self) -> int:
        return len(self.group)

    def batches(self, size: int, rng: np.random.Generator | None) -> list[tuple[int, np.ndarray]]:
        out = []
        for g in np.unique(self.group):
            idx = np.flatnonzero(self.group == g)
            if rng is not None:
                idx = rng.permutation(idx)
            out += [(int(g), idx[i:i + size]) for i in range(0, len(idx), size)]
        if rng is not None:
            out = [out[i] for i in rng.permutation(len(out))]
        return out

    def run(self, model: Scorer, g: int, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        i = torch.from_numpy(idx)
        t = self.t
        scores = model(t["nodes"][i], self.topos[g], t["queues"][i], t["jobs"][i], t["pairs"][i])
        return scores, t["feasible"][i], t["target"][i]


def evaluate(model: Scorer, data: _Data, batch: int = 32) -> tuple[float, float]:
    """Mean loss and agreement over ``data``."""
    model.eval()
    losses, agree = [], []
    with torch.no_grad():
        for g, idx in data.batches(batch, None):
            scores, feasible, target = data.run(model, g, idx)
            losses.append(listwise_loss(scores, feasible, target))
            agree.append(agreement(scores, feasible, target))
    model.train()
    return float(torch.cat(losses).mean()), float(torch.cat(agree).float().mean())


def train_imitation(train: Demonstrations, config: ModelConfig, options: TrainOptions | None = None, *,
                    val: Demonstrations | None = None,
                    on_batch: Callable[[int, int, float], None] | None = None) -> tuple[Scorer, TrainHistory]:  # fmt: skip
    """Train a new scorer on ``train``; ``on_batch(epoch, batches_done, loss)`` for a progress bar."""
    opts = options or TrainOptions()
    if not len(train):
        raise ValueError("no demonstrations to train on")
    torch.manual_seed(opts.seed)
    rng = np.random.default_rng(opts.seed)
    started = time.perf_counter()
    model = Scorer(config)
    model.train()
    data = _Data(train, config)
    val_data = _Data(val, config) if val is not None and len(val) else None
    optimiser = torch.optim.AdamW(model.parameters(), lr=opts.lr, weight_decay=opts.weight_decay)
    total_steps = opts.epochs * len(data.batches(opts.batch, None))
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=opts.lr, total_steps=max(1, total_steps))
    history = TrainHistory()
    done = 0
    for epoch in range(opts.epochs):
        losses, agree = [], []
        for g, idx in data.batches(opts.batch, rng):
            scores, feasible, target = data.run(model, g, idx)
            loss = listwise_loss(scores, feasible, target).mean()
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimiser.step()
            schedule.step()
            losses.append(loss.item() * len(idx))
            agree.append(float(agreement(scores.detach(), feasible, target).float().sum()))
            done += 1
            if on_batch is not None:
                on_batch(epoch, done, losses[-1] / len(idx))
        history.loss.append(sum(losses) / len(data))
        history.agreement.append(sum(agree) / len(data))
        if val_data is not None:
            vl, va = evaluate(model, val_data)
            history.val_loss.append(vl)
            history.val_agreement.append(va)
    history.seconds = time.perf_counter() - started
    model.eval()
    return model, history
