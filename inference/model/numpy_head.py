"""The policy head's scores for one job on a few nodes, in numpy: in-step re-scoring.

While ``schedule_step`` places a step's jobs one by one, each later job has its score
recomputed on the handful of nodes earlier placements moved (:mod:`inference.rescoring`).
At that size torch's per-call cost is most of the work: through ``score_nodes`` on two nodes,
about 85 µs with torch against about 50 in numpy; inside a step of 256 pending the re-score
calls went from about 270 to 60 µs each.

:func:`numpy_head` mirrors :meth:`PolicyHead.score` and :meth:`ShapeFactoredHead.score` of
:mod:`inference.model.policy_head` (a test holds them equal to 1e-5 for both heads and both
depths). Its weights are numpy views of the torch parameters — the same memory — so an
in-place update (an optimiser step, ``load_state_dict``) is seen at once; a parameter given new
memory (``.to()``, ``load_state_dict(assign=True)``) is noticed at the next call and the views
are made again. For a head it does not mirror, or a model off the CPU, it answers ``None`` and
the caller stays on torch.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from torch import nn

from inference.features.spec import SHAPE_COLUMNS
from inference.model.policy_head import PolicyHead, ShapeFactoredHead

Layer = tuple[np.ndarray, np.ndarray | None] | None  # a Linear's (weight [out, in], bias) or None for a ReLU


def _layers(seq: nn.Module) -> list[Layer] | None:
    """A ``Sequential`` of ``Linear`` and ``ReLU`` as numpy views; ``None`` for anything else."""
    mods = list(seq) if isinstance(seq, nn.Sequential) else [seq]
    out: list[Layer] = []
    for m in mods:
        if isinstance(m, nn.ReLU):
            out.append(None)
        elif isinstance(m, nn.Linear):
            out.append((_view(m.weight), None if m.bias is None else _view(m.bias)))
        else:
            return None
    return out


def _view(p: nn.Parameter) -> np.ndarray:
    return p.detach().numpy()  # shares the parameter's memory (CPU only)


def _run(layers: list[Layer], x: np.ndarray) -> np.ndarray:
    for layer in layers:
        if layer is None:
            x = np.maximum(x, 0.0)
        else:
            w, b = layer
            x = x @ w.T
            if b is not None:
                x = x + b
    return x


class NumpyHead:
    """A head's ``score(node_part [M, W], job_row [job_dim], pairs [M, P])`` → float32 ``[M]``."""

    def __init__(self, head: PolicyHead | ShapeFactoredHead) -> None:
        self.factored = isinstance(head, ShapeFactoredHead)
        parts = {name: _layers(getattr(head, name)) for name in ("pair", "out", "job")}
        if self.factored:
            parts["shape"] = _layers(head.shape)
        if any(v is None for v in parts.values()):
            raise TypeError(f"{type(head).__name__} has layers numpy_head does not mirror")
        self.parts: dict[str, list[Layer]] = parts  # type: ignore[assignment]

    def score(self, node_part: np.ndarray, job_row: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        p = self.parts
        x = _run(p["pair"], pairs) + node_part
        if not self.factored:
            return _run(p["out"], x + _run(p["job"], job_row))[:, 0].astype(np.float32, copy=False)
        x += _run(p["shape"], job_row[:SHAPE_COLUMNS])
        table = _run(p["out"], x)  # [M, 1 + R]: b, f_1 … f_R
        coeff = _run(p["job"], job_row)  # [R]
        return (table[:, 0] + table[:, 1:] @ coeff).astype(np.float32, copy=False)


_HEADS: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], NumpyHead | None]] = weakref.WeakKeyDictionary()


def numpy_head(head: Any) -> NumpyHead | None:
    """The numpy mirror of ``head`` (made again when a parameter moved to other memory), or
    ``None``: a head type it does not mirror (a subclass may score otherwise), or parameters
    off the CPU."""
    where = tuple((p.data_ptr(), p.device.type, p.dtype) for p in head.parameters())
    known = _HEADS.get(head)
    if known is None or known[0] != where:
        ok = type(head) in (PolicyHead, ShapeFactoredHead) and all(w[1] == "cpu" for w in where)
        try:
            _HEADS[head] = (where, NumpyHead(head) if ok else None)
        except TypeError:
            _HEADS[head] = (where, None)
    return _HEADS[head][1]
