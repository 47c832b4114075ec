"""The policy head's scores (and ψ's costs) for one job on a few nodes, in numpy.

While ``schedule_step`` places a step's jobs one by one, each later job has its score
recomputed on the handful of nodes earlier placements moved (:mod:`inference.rescoring`).
At that size torch's per-call cost is most of the work: through ``score_nodes`` on two nodes,
about 85 µs with torch against about 50 in numpy; inside a step of 256 pending the re-score
calls went from about 270 to 60 µs each.

:func:`numpy_head` mirrors :meth:`PolicyHead.score` and :meth:`ShapeFactoredHead.score` of
:mod:`inference.model.policy_head` (a test holds them equal to 1e-5 for both heads and both
depths). Its weights are numpy views of the torch parameters — the same memory — so an
in-place update (an optimiser step, ``load_state_dict``) is seen at once; a parameter given new
memory or replaced (``.to()``, ``load_state_dict(assign=True)``) is noticed at the next call and
the views are made again (a submodule replaced whole is not: nothing here does that). For a head it does not mirror, or a model off the CPU, it answers ``None`` and
the caller stays on torch.

:func:`numpy_cost` mirrors the cost estimator ψ (:class:`inference.model.scorer.CostHead`) the same
way, for the decision record's ψ at a node outside the answer's best-scored ones
(:func:`inference.model.step.cost_at`, once or twice a placement): through torch it was 4 % of a
learned demo worker's event loop; 72 µs a call against 18 in numpy (a warm micro-benchmark).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from torch import nn

from inference.features.spec import SHAPE_COLUMNS
from inference.model.policy_head import PolicyHead, ShapeFactoredHead
from inference.model.scorer import CostHead

Layer = tuple[np.ndarray, np.ndarray | None] | None  # a Linear's (weight [out, in], bias) or None for a ReLU


Viewed = tuple[nn.Module, str, nn.Parameter, int]  # (owner, name, the parameter, where its memory was)


def _layers(seq: nn.Module, viewed: list[Viewed]) -> list[Layer] | None:
    """A ``Sequential`` of ``Linear`` and ``ReLU`` as numpy views (each noted in ``viewed``);
    ``None`` for anything else."""
    mods = list(seq) if isinstance(seq, nn.Sequential) else [seq]
    out: list[Layer] = []
    for m in mods:
        if isinstance(m, nn.ReLU):
            out.append(None)
        elif isinstance(m, nn.Linear):
            out.append((_view(m, "weight", viewed), None if m.bias is None else _view(m, "bias", viewed)))
        else:
            return None
    return out


def _view(owner: nn.Module, name: str, viewed: list[Viewed]) -> np.ndarray:
    p = owner._parameters[name]
    viewed.append((owner, name, p, p.data_ptr()))
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


class _Mirror:
    """Numpy views of a module's ``Linear`` / ``ReLU`` stacks ``names``, and whether they are still current."""

    def __init__(self, module: nn.Module, names: tuple[str, ...]) -> None:
        self.viewed: list[Viewed] = []
        parts = {name: _layers(getattr(module, name), self.viewed) for name in names}
        if any(v is None for v in parts.values()):
            raise TypeError(f"{type(module).__name__} has layers the numpy mirror does not know")
        self.parts: dict[str, list[Layer]] = parts  # type: ignore[assignment]

    def current(self) -> bool:
        """Whether every parameter viewed is still its owner's, in the same memory (a few µs: it
        is asked on every call)."""
        return all(owner._parameters[name] is p and p.data_ptr() == ptr for owner, name, p, ptr in self.viewed)


class NumpyHead(_Mirror):
    """A head's ``score(node_part [M, W], job_row [job_dim], pairs [M, P])`` → float32 ``[M]``."""

    def __init__(self, head: PolicyHead | ShapeFactoredHead) -> None:
        self.factored = isinstance(head, ShapeFactoredHead)
        super().__init__(head, ("pair", "out", "job", "shape") if self.factored else ("pair", "out", "job"))

    def score(self, node_part: np.ndarray, job_row: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        p = self.parts
        x = _run(p["pair"], pairs) + node_part
        if not self.factored:
            return _run(p["out"], x + _run(p["job"], job_row))[:, 0].astype(np.float32, copy=False)
        x += _run(p["shape"], job_row[:SHAPE_COLUMNS])
        table = _run(p["out"], x)  # [M, 1 + R]: b, f_1 … f_R
        coeff = _run(p["job"], job_row)  # [R]
        return (table[:, 0] + table[:, 1:] @ coeff).astype(np.float32, copy=False)


class NumpyCostHead(_Mirror):
    """ψ's ``cost(node_part [M, W], job_row [job_dim], pairs [M, P])`` → float32 ``[M, cost_dim]``
    (:meth:`inference.model.scorer.CostHead.forward` on one job)."""

    def __init__(self, head: CostHead) -> None:
        super().__init__(head, ("pair", "job", "out"))

    def cost(self, node_part: np.ndarray, job_row: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        p = self.parts
        x = _run(p["pair"], pairs) + node_part + _run(p["job"], job_row)
        return _run(p["out"], x).astype(np.float32, copy=False)


Mirrors = weakref.WeakKeyDictionary[nn.Module, _Mirror | None]
_HEADS: Mirrors = weakref.WeakKeyDictionary()  # one cache per kind of mirror: a module asked for as
_COSTS: Mirrors = weakref.WeakKeyDictionary()  # the wrong kind must not answer for the right one


def _mirror(module: Any, kinds: dict[type, type[_Mirror]], cache: Mirrors) -> Any:
    """The numpy mirror of ``module`` (made again when a parameter was replaced or moved to other
    memory), or ``None``: a type it does not mirror (a subclass may compute otherwise), or
    parameters off the CPU."""
    known = cache.get(module, False)
    if known is None or (known is not False and known.current()):
        return known
    kind = kinds.get(type(module))
    ok = kind is not None and all(p.device.type == "cpu" for p in module.parameters())
    try:
        cache[module] = kind(module) if ok else None  # type: ignore[misc]
    except TypeError:
        cache[module] = None
    return cache[module]


def numpy_head(head: Any) -> NumpyHead | None:
    """The numpy mirror of a policy head (:func:`_mirror`)."""
    return _mirror(head, {PolicyHead: NumpyHead, ShapeFactoredHead: NumpyHead}, _HEADS)


def numpy_cost(head: Any) -> NumpyCostHead | None:
    """The numpy mirror of a cost head ψ (:func:`_mirror`; ``None`` for a model without one)."""
    return None if head is None else _mirror(head, {CostHead: NumpyCostHead}, _COSTS)
