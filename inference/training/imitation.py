"""Imitation learning: fit the scorer to an expert's choices (issue 4 point 4, first stage).

Loss: listwise cross-entropy over the feasible nodes of each recorded state, with the
expert's target SET as the positive class — ``logsumexp(scores[feasible]) −
logsumexp(scores[target])``, the negative log of the probability the softmax policy puts on
any of the expert's best nodes (FGD ties often; see :mod:`inference.training.collect`).
Agreement = share of states whose argmax over feasible nodes is in the target set.

``TrainOptions.target = "choice"`` takes the expert's ACTUAL pick (the first of its best
nodes, :mod:`inference.training.collect`) as the single positive instead: the set loses
FGD's tie-break, which is what packs. Agreement is then exact agreement with the pick.

**Auxiliary losses** (issue 4 point 3; each only when the model has the head, the
demonstrations carry the labels and the weight is > 0):

- ``cost_weight``: mean squared error of ψ's column 0 against the fragmentation each
  feasible placement adds (in GPUs) and, for a ψ with a second column, of that column against
  ``log(1 + the job's recorded run time in s)`` on every feasible node, where the trace has one
  (pods that never ran have none). It is the run time at nominal speed, the same label on every
  node: the simulators' node speeds (``--heterogeneity``) are hidden from every policy;
- ``transition_weight``: ‖T(h_t, a_t) − h_{t+1}‖² per node, ``h_{t+1}`` the encoder's
  embedding of the next state (:func:`inference.training.next_state.next_states`: the chosen node's
  row and the columns every node carries about its GPU model and the cluster; stop-gradient target).
  A new model's T starts as "no change" (``TransitionHead.start_as_no_change``), and the history
  carries ‖h_t − h_{t+1}‖² beside it (``transition_no_change``, weight 0): T is worth rolling only
  where its error is below that;
- by default the cost and transition losses train their heads on the DETACHED representation
  (``aux_grad=False``): with gradients into the encoder they fought the policy loss (exact
  agreement 0.51 instead of 0.71 after 8 epochs on 4 fill seeds, before FGD's pick became a
  feature);
- ``delta_weight``: the self-correction regulariser ``E_{n∼π}[Δ(h_t, (j, n))]`` with Δ held
  fixed: the policy learns to prefer, among near-equals, actions that move the
  representation less (damps churn).

Deterministic given ``seed`` (torch and numpy seeded, one thread order of batches).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from inference.features.cluster import model_groups
from inference.features.topology import build_topology
from inference.model.config import ModelConfig
from inference.model.scorer import Action, Scorer, TorchTopology
from inference.training.collect import PER_NODE, Demonstrations
from inference.training.next_state import next_states


@dataclass
class TrainOptions:
    epochs: int = 8
    batch: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-5
    seed: int = 0
    target: str = "set"  # "set": any of the expert's best nodes; "choice": its actual pick
    cost_weight: float = 0.0
    transition_weight: float = 0.0
    delta_weight: float = 0.0
    aux_grad: bool = False  # whether the cost and transition losses also train the encoder (else heads only)
    token_window: int = 16  # a model with job tokens: each state's job and up to this many - 1 next ones (token_windows)


@dataclass
class TrainHistory:
    loss: list[float] = field(default_factory=list)  # mean training loss per epoch
    agreement: list[float] = field(default_factory=list)  # training agreement per epoch (during the epoch)
    val_loss: list[float] = field(default_factory=list)
    val_agreement: list[float] = field(default_factory=list)
    aux: list[dict[str, float]] = field(default_factory=list)  # mean auxiliary losses per epoch
    val_aux: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0

    def transition_vs_no_change(self) -> float | None:
        """T's last validation error over that of predicting no change (below 1: T knows something
        about where a placement moves the state); ``None`` without a trained T or validation states."""
        last = self.val_aux[-1] if self.val_aux else {}
        if "transition" not in last or not last.get("transition_no_change"):
            return None
        return last["transition"] / last["transition_no_change"]

    def to_json(self) -> dict[str, Any]:
        return {"loss": self.loss, "agreement": self.agreement, "val_loss": self.val_loss,
                "val_agreement": self.val_agreement, "aux": self.aux, "val_aux": self.val_aux,
                "seconds": self.seconds}  # fmt: skip


def listwise_loss(scores: torch.Tensor, feasible: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per state: ``logsumexp(scores | feasible) − logsumexp(scores | target)`` (``[B]``)."""
    neg = torch.finfo(scores.dtype).min
    return (torch.logsumexp(scores.masked_fill(~feasible, neg), dim=1)
            - torch.logsumexp(scores.masked_fill(~target, neg), dim=1))  # fmt: skip


def agreement(scores: torch.Tensor, feasible: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per state: whether the argmax over feasible nodes is one of the expert's best."""
    pick = scores.masked_fill(~feasible, float("-inf")).argmax(dim=1)
    return target.gather(1, pick[:, None])[:, 0]


def token_windows(group: np.ndarray, window: int, seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """The job tokens of each recorded state, for a model with job tokens: its own job and the jobs of
    the next ``L − 1`` states recorded in the same run, ``L`` drawn uniformly from 1..``window`` per
    state (``seed``; ``None``: always ``window``). A fill state decides one pod, so the pods after it
    stand in for a queue; the varying length shows the model both what it meets in the fill
    benchmark (a step of one pod: one token) and in the worker (a queue). Indices
    ``[M, window]`` into the states and their mask (past ``L`` or a run's end: padding)."""
    m, window = len(group), max(1, window)
    idx = np.arange(m)[:, None] + np.arange(window)[None, :]
    clipped = np.minimum(idx, max(m - 1, 0))
    mask = (idx < m) & (group[clipped] == group[:, None])
    if seed is not None:
        lengths = np.random.default_rng(seed).integers(1, window + 1, size=m)
        mask &= np.arange(window)[None, :] < lengths[:, None]
    return np.where(mask, clipped, np.arange(m)[:, None]), mask


def padded_tokens(tokens: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-state token rows (``[K_i, job_dim]`` each) as one float32 ``[M, max K_i, job_dim]`` array,
    zero-padded, and its mask."""
    width = max(len(t) for t in tokens)
    rows = np.zeros((len(tokens), width, tokens[0].shape[1]), np.float32)
    mask = np.zeros((len(tokens), width), bool)
    for k, t in enumerate(tokens):
        rows[k, : len(t)], mask[k, : len(t)] = t, True
    return rows, mask


class _Data:
    """The demonstrations as tensors, batched within one node table (one topology) at a time."""

    def __init__(self, demos: Demonstrations, config: ModelConfig, token_window: int = 16, seed: int = 0) -> None:
        a = demos.arrays()
        self.t = {k: torch.from_numpy(v) for k, v in a.items()}
        self.group = np.asarray(demos.group)
        self.sizes = [s.num_nodes for s in demos.snapshots]  # each table's nodes (the arrays are padded to the largest)
        self.topos = [TorchTopology(build_topology(s, config.spec, config.knn)) for s in demos.snapshots]
        self.model_groups = [model_groups(s) for s in demos.snapshots]  # (next_states: T's target)
        self.spec = config.spec
        self.tokens: tuple[torch.Tensor, torch.Tensor] | None = None  # indices into the states' jobs, mask
        self.queue_tokens: tuple[torch.Tensor, torch.Tensor] | None = None  # recorded queues' rows, mask
        if config.job_tokens and demos.has("tokens"):  # real queues (the archive's)
            rows, mask = padded_tokens(demos.tokens)
            self.queue_tokens = torch.from_numpy(rows), torch.from_numpy(mask)
        elif config.job_tokens:
            idx, mask = token_windows(self.group, token_window, seed)
            self.tokens = torch.from_numpy(idx), torch.from_numpy(mask)

    def job_tokens(self, i: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The states' job tokens ``[B, K, job_dim]`` and mask (``None, None`` without job tokens): the
        queue recorded with each state where the demonstrations carry one, else :func:`token_windows`."""
        if self.queue_tokens is not None:
            rows, mask = self.queue_tokens
            return rows[i], mask[i]
        if self.tokens is None:
            return None, None
        idx, mask = self.tokens
        return self.t["jobs"][idx[i]], mask[i]

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

    def at(self, g: int, i: torch.Tensor) -> dict[str, torch.Tensor]:
        """The fields of samples ``i`` (all of node table ``g``), the per-node ones cut to that table's size."""
        n = self.sizes[g]
        return {k: v[i][:, :n] if k in PER_NODE else v[i] for k, v in self.t.items()}

    def run(self, model: Scorer, g: int, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        i = torch.from_numpy(idx)
        t = self.at(g, i)
        scores = model(t["nodes"], self.topos[g], t["queues"], t["jobs"], t["pairs"], *self.job_tokens(i))
        return scores, t["feasible"], t["target"]

    def step(self, model: Scorer, g: int, idx: np.ndarray,
             opts: TrainOptions) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor, torch.Tensor,
                                          torch.Tensor]:  # fmt: skip
        """The batch's total loss, its parts, and (scores, feasible, target) for the agreement."""
        i = torch.from_numpy(idx)
        t = self.at(g, i)
        nodes, queue, jobs, pairs, feasible = (t[k] for k in ("nodes", "queues", "jobs", "pairs", "feasible"))
        topo = self.topos[g]
        tokens = self.job_tokens(i)
        h = model.encode(nodes, topo, queue, *tokens)
        node_part = model.head.precompute(h)
        scores = model.head.score(node_part, jobs, pairs)
        target = t["target"]
        if opts.target == "choice" and "choice" in t:
            target = torch.zeros_like(target).scatter_(1, t["choice"][:, None], True)
        parts = {"policy": listwise_loss(scores, feasible, target).mean()}
        h_aux, part_aux = (h, node_part) if opts.aux_grad else (h.detach(), node_part.detach())
        if model.cost_head is not None and opts.cost_weight > 0 and "cost" in t:
            cost = model.cost(part_aux, jobs, pairs)
            err = (cost[..., 0] - 8.0 * t["cost"]) ** 2  # GPUs
            parts["cost"] = (err * feasible).sum() / feasible.sum().clamp(min=1)
            if cost.shape[-1] > 1 and "run_time" in t:  # ψ's expected run time, log(1 + s), where it is known
                run_time = t["run_time"].float()
                known = feasible & ~torch.isnan(run_time)[:, None]
                err = (cost[..., 1] - torch.log1p(torch.nan_to_num(run_time))[:, None]) ** 2
                parts["run_time"] = (err * known).sum() / known.sum().clamp(min=1)
        if model.transition_head is not None and "choice" in t and "next_row" in t:
            b = torch.arange(len(idx))
            choice = t["choice"]
            if opts.transition_weight > 0:
                after = next_states(nodes, choice, t["next_row"], self.model_groups[g], self.spec, t.get("prev_row"))
                with torch.no_grad():  # the same tokens: decisions roll T within one step's queue
                    h_next = model.encode(after, topo, queue, *tokens)
                pred = model.transition(h_aux, Action(jobs, choice, pairs[b, choice]))
                parts["transition"] = ((pred - h_next) ** 2).sum(-1).mean()
                parts["transition_no_change"] = ((h.detach() - h_next) ** 2).sum(-1).mean()  # (T's yardstick)
            if opts.delta_weight > 0:
                with torch.no_grad():
                    delta = model.delta(h, jobs, pairs)
                neg = torch.finfo(scores.dtype).min
                pi = torch.softmax(scores.masked_fill(~feasible, neg), dim=1)
                parts["delta"] = (pi * delta).sum(1).mean()
        weights = {"policy": 1.0, "cost": opts.cost_weight, "run_time": opts.cost_weight,
                   "transition": opts.transition_weight, "delta": opts.delta_weight,
                   "transition_no_change": 0.0}  # fmt: skip
        total = sum(weights[k] * v for k, v in parts.items())
        assert isinstance(total, torch.Tensor)
        return total, parts, scores, feasible, target


def evaluate(model: Scorer, data: _Data, batch: int = 32, opts: TrainOptions | None = None,
             aux: dict[str, float] | None = None) -> tuple[float, float]:  # fmt: skip
    """Mean policy loss and agreement over ``data`` (targets per ``opts.target``); the mean
    auxiliary losses go into ``aux`` when given."""
    opts = opts or TrainOptions()
    model.eval()
    losses, agree, sums = [], [], {}
    with torch.no_grad():
        for g, idx in data.batches(batch, None):
            _, parts, scores, feasible, target = data.step(model, g, idx, opts)
            losses.append(listwise_loss(scores, feasible, target))
            agree.append(agreement(scores, feasible, target))
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + float(v) * len(idx)
    model.train()
    if aux is not None:
        aux.update({k: v / len(data) for k, v in sums.items() if k != "policy"})
    return float(torch.cat(losses).mean()), float(torch.cat(agree).float().mean())


def train_imitation(train: Demonstrations, config: ModelConfig, options: TrainOptions | None = None, *,
                    val: Demonstrations | None = None,
                    on_batch: Callable[[int, int, float], None] | None = None,
                    init: Scorer | None = None) -> tuple[Scorer, TrainHistory]:  # fmt: skip
    """Train a new scorer on ``train`` (or continue from a copy of ``init``, DAgger's later
    rounds; its config must be ``config``); ``on_batch(epoch, batches_done, loss)`` for a progress bar."""
    opts = options or TrainOptions()
    if not len(train):
        raise ValueError("no demonstrations to train on")
    torch.manual_seed(opts.seed)
    rng = np.random.default_rng(opts.seed)
    started = time.perf_counter()
    if init is not None and init.config != config:
        raise ValueError("init's config differs from config")
    model = copy.deepcopy(init) if init is not None else Scorer(config)
    if init is None and model.transition_head is not None:
        model.transition_head.start_as_no_change()
    model.train()
    data = _Data(train, config, opts.token_window, opts.seed)
    val_data = _Data(val, config, opts.token_window, opts.seed + 1) if val is not None and len(val) else None
    optimiser = torch.optim.AdamW(model.parameters(), lr=opts.lr, weight_decay=opts.weight_decay)
    total_steps = opts.epochs * len(data.batches(opts.batch, None))
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=opts.lr, total_steps=max(1, total_steps))
    history = TrainHistory()
    done = 0
    for epoch in range(opts.epochs):
        losses, agree, aux = [], [], {}
        for g, idx in data.batches(opts.batch, rng):
            loss, parts, scores, feasible, target = data.step(model, g, idx, opts)
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimiser.step()
            schedule.step()
            losses.append(parts["policy"].item() * len(idx))
            for k, v in parts.items():
                aux[k] = aux.get(k, 0.0) + v.item() * len(idx)
            agree.append(float(agreement(scores.detach(), feasible, target).float().sum()))
            done += 1
            if on_batch is not None:
                on_batch(epoch, done, losses[-1] / len(idx))
        history.loss.append(sum(losses) / len(data))
        history.agreement.append(sum(agree) / len(data))
        history.aux.append({k: v / len(data) for k, v in aux.items() if k != "policy"})
        if val_data is not None:
            val_aux: dict[str, float] = {}
            vl, va = evaluate(model, val_data, opts=opts, aux=val_aux)
            history.val_loss.append(vl)
            history.val_agreement.append(va)
            history.val_aux.append(val_aux)
    history.seconds = time.perf_counter() - started
    model.eval()
    return model, history
