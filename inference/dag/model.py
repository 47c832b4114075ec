"""The two-stage DAG policy network: a task scorer over the ready tasks, then a processor
scorer over the processors for the chosen task (the action of the DRL workflow paper).

Stage one embeds each ready task's features, adds a mean-pooled summary of the whole ready
set (so a task is scored relative to its competitors) and scores it. Stage two scores each
processor from its features and the chosen task's embedding. Both stages take padded
batches with a boolean mask; masked entries get ``-inf`` logits, so padding (and anything
not ready / not a processor) can never be chosen. A few thousand parameters: fast on CPU.

The graph structure reaches the network through the static features (upward/downward
ranks, levels, degrees, communication volumes) rather than through message passing, which
keeps a decision at well under a millisecond of network time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from inference.dag.features import PROC_DIM, TASK_DIM

WEIGHTS, CONFIG = "policy.pt", "config.json"


@dataclass(frozen=True)
class NetConfig:
    task_dim: int = TASK_DIM
    proc_dim: int = PROC_DIM
    hidden: int = 64
    #: stage two sees the other processors too (mean- and max-pooled embeddings), so it scores a
    #: processor relative to the alternatives; False: each processor on its own (older models)
    proc_context: bool = False


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))


class DagPolicyNet(nn.Module):
    def __init__(self, config: NetConfig | None = None) -> None:
        super().__init__()
        self.config = config or NetConfig()
        c = self.config
        self.task_enc = _mlp(c.task_dim, c.hidden, c.hidden)
        self.task_head = nn.Sequential(nn.ReLU(), nn.Linear(2 * c.hidden, c.hidden), nn.ReLU(), nn.Linear(c.hidden, 1))
        if c.proc_context:
            self.proc_enc = _mlp(c.proc_dim + c.hidden, c.hidden, c.hidden)
            self.proc_head = nn.Sequential(nn.ReLU(), nn.Linear(3 * c.hidden, c.hidden), nn.ReLU(),
                                           nn.Linear(c.hidden, 1))  # fmt: skip
        else:
            self.proc_head = _mlp(c.proc_dim + c.hidden, c.hidden, 1)

    def task_logits(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (B, R, task_dim), ``mask`` (B, R) True = ready → logits (B, R), embeddings (B, R, H)."""
        emb = self.task_enc(x)
        m = mask.unsqueeze(-1).to(emb.dtype)
        pooled = (emb * m).sum(1) / m.sum(1).clamp_min(1.0)
        both = torch.cat([emb, pooled.unsqueeze(1).expand_as(emb)], dim=-1)
        logits = self.task_head(both).squeeze(-1)
        return logits.masked_fill(~mask, float("-inf")), emb

    def proc_logits(self, x: torch.Tensor, task_emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x`` (B, P, proc_dim), ``task_emb`` (B, H), ``mask`` (B, P) → logits (B, P)."""
        both = torch.cat([x, task_emb.unsqueeze(1).expand(-1, x.shape[1], -1)], dim=-1)
        if self.config.proc_context:
            emb = self.proc_enc(both)
            m = mask.unsqueeze(-1)
            mean = (emb * m).sum(1) / m.sum(1).clamp_min(1)
            top = emb.masked_fill(~m, float("-inf")).max(1).values
            ctx = torch.cat([mean, top], dim=-1).unsqueeze(1).expand(-1, x.shape[1], -1)
            both = torch.cat([emb, ctx], dim=-1)
        return self.proc_head(both).squeeze(-1).masked_fill(~mask, float("-inf"))


def save_model(net: DagPolicyNet, directory: Path, meta: dict[str, object] | None = None) -> Path:
    """Write ``policy.pt`` (state dict) and ``config.json`` (net config + ``meta``) to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), directory / WEIGHTS)
    (directory / CONFIG).write_text(json.dumps({"net": asdict(net.config), "meta": meta or {}}, indent=2))
    return directory


class DagModelError(ValueError):
    """A DAG model directory whose files do not make a network (unreadable, or weights of
    another shape than its config says)."""


def load_model(directory: Path) -> DagPolicyNet:
    """The network saved in ``directory``; raises ``FileNotFoundError`` when there is none and
    :class:`DagModelError` (one line: the directory and why) when it does not load."""
    cfg_path, w_path = directory / CONFIG, directory / WEIGHTS
    if not cfg_path.exists() or not w_path.exists():
        raise FileNotFoundError(f"no DAG policy model in {directory} (need {CONFIG} and {WEIGHTS})")
    try:
        net = DagPolicyNet(NetConfig(**json.loads(cfg_path.read_text())["net"]))
        net.load_state_dict(torch.load(w_path, map_location="cpu", weights_only=True))
    except Exception as e:  # JSON, config fields, pickle, shapes: the model is not usable, whatever the cause
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [""]
        shapes = [line for line in lines if line.startswith("size mismatch")]  # torch lists every tensor
        why = f"{shapes[0]} (and {len(shapes) - 1} more)" if len(shapes) > 1 else (shapes or lines)[0]
        raise DagModelError(f"the DAG model in {directory} does not load: {type(e).__name__}: {why}") from e
    net.eval()
    return net
