"""``learned``: the torch scorer as a scheduling policy, in-process (issue 4 point 4).

FIFO order; ``score(job, snapshot, feasible_mask)`` = the policy head over every node, with
infeasible nodes at ``-inf``. Registered in the placement registry as ``learned`` when
:mod:`inference` is imported (``scheduling`` never imports ``inference``).

**The model.** ``model_dir`` (default: ``$SEMSCHED_MODEL_DIR``, else ``models/latest``) holds
``model.pt`` + ``config.json`` (:mod:`inference.model.io`). If it is missing or fails to
load, the policy falls back to a heuristic (``fallback="fgd"``; its kwargs in
``fallback_kwargs``) for every call, and says so: ``fell_back`` is True, ``fallback_reason``
the error, ``model_version`` ``None``.

**When node embeddings are recomputed** (the fusion encoder runs once per step; the head
then sees each node's current free capacity through the pair features, so scores stay
right while ``place_one`` reserves jobs one by one):

- ``order()`` marks the start of a step (``schedule_step`` calls it once per step, on its
  own copy of the snapshot): the next ``score`` re-encodes, and the embeddings are kept for
  every later call on that same snapshot object until the next ``order()``;
- a different snapshot object always re-encodes (identity: the policy holds a reference to
  the snapshot it encoded, so the id cannot be recycled);
- a caller that scores jobs one by one on one long-lived snapshot without ever calling
  ``order()`` (the fill benchmark, ``scheduling.fill.run_fill``) gets a re-encode every
  ``refresh_every`` calls (default 1: each placement sees embeddings of the current state,
  as in training). A caller that mutates a snapshot some other way between steps must call
  ``order()`` (or pass a copy).

GPUs inside the chosen node: best fit (:func:`scheduling.gpu_select.select_gpus`) — what the
pair features assume; after a fallback, the fallback's own choice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inference.encoders import EncoderCache, get_encoder
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from inference.features.topology import build_topology
from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.policies.base import BasePolicy, Policy
from scheduling.policies.registry import get_policy, register
from scheduling.snapshot import ClusterSnapshot

MODEL_DIR_ENV = "SEMSCHED_MODEL_DIR"
DEFAULT_MODEL_DIR = Path("models/latest")


def default_model_dir() -> Path:
    return Path(os.environ.get(MODEL_DIR_ENV) or DEFAULT_MODEL_DIR)


@register("learned")
class LearnedPolicy(BasePolicy):
    name = "learned"

    def __init__(self, model_dir: str | Path | None = None, *, fallback: str = "fgd",
                 fallback_kwargs: dict[str, Any] | None = None, refresh_every: int = 1,
                 loaded: Any = None) -> None:  # fmt: skip
        """``loaded``: an :class:`inference.model.io.LoadedModel` to use instead of a directory (tests, training)."""
        self.model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        self.refresh_every = max(1, int(refresh_every))
        self.fallback_name = fallback
        self.fell_back = False
        self.fallback_reason: str | None = None
        self.fallback: Policy | None = None
        self.model_version: str | None = None
        self.loaded = loaded
        if self.loaded is None:
            try:
                from inference.model.io import load_model

                self.loaded = load_model(self.model_dir)
            except Exception as e:  # missing, corrupt or mismatched: any failure means "use the heuristic"
                self.fell_back = True
                self.fallback_reason = f"{type(e).__name__}: {e}"
                self.fallback = get_policy(fallback, **dict(fallback_kwargs or {}))
        if self.loaded is not None:
            import torch

            torch.set_num_threads(1)  # many tiny ops: threads cost more than they give
            self.model_version = self.loaded.version
            self.spec = self.loaded.config.spec
            self.encoder = EncoderCache(get_encoder(self.spec.encoder))
        self._snap: ClusterSnapshot | None = None
        self._node_part: Any = None
        self._calls = 0
        self._in_step = False
        self._order_seen = False
        self._now: float | None = None
        self._queue = None
        self._topologies: dict[int, Any] = {}

    # -- the Policy protocol -------------------------------------------------------------------
    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ordered = super().order(jobs, now, context)
        if self.fell_back:
            return ordered
        self._now = now
        self._order_seen = True
        self._snap = None
        self._queue = job_demand(ordered, now, self.spec, self.encoder).mean(axis=0) if ordered else None
        return ordered

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        if self.fell_back:
            assert self.fallback is not None
            return self.fallback.score(job, snapshot, feasible_mask)
        import torch

        node_part = self.node_part(snapshot)
        now = self._now if self._now is not None else job.submit_time
        jobs = torch.from_numpy(job_demand([job], now, self.spec, self.encoder)[0])
        pairs = torch.from_numpy(pair_features(job, snapshot))
        with torch.inference_mode():
            scores = self.loaded.model.head.score(node_part, jobs, pairs).numpy().astype(np.float64)
        scores[~feasible_mask] = -np.inf
        return scores

    def score_all(self, jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, now: float = 0.0) -> np.ndarray:
        """float32 ``[J, N]``: every job against every node on the snapshot as it is (unmasked) —
        one batched model call per step, as a model server would take it. Pair features are
        computed once per distinct job shape (resources), the head's pair term likewise. Call
        :meth:`order` first at the start of a step (as ``schedule_step`` does)."""
        import torch

        node_part = self.node_part(snapshot)
        head = self.loaded.model.head
        shapes: dict[tuple[int, int, int, int], int] = {}
        first: list[JobRequest] = []
        which = np.empty(len(jobs), dtype=np.int64)
        for i, j in enumerate(jobs):
            key = (j.cpu_milli, j.memory_mib, j.num_gpu, j.per_gpu_milli)
            if key not in shapes:
                shapes[key] = len(first)
                first.append(j)
            which[i] = shapes[key]
        pairs = torch.from_numpy(np.stack([pair_features(j, snapshot) for j in first]))
        job_x = torch.from_numpy(job_demand(jobs, now, self.spec, self.encoder))
        with torch.inference_mode():
            base = node_part + head.pair(pairs)  # [S, N, W]
            x = base[torch.from_numpy(which)] + head.job(job_x).unsqueeze(1)
            return head.out(x).squeeze(-1).numpy()

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        if self.fell_back and hasattr(self.fallback, "select_gpus"):
            return self.fallback.select_gpus(snapshot, node_index, job)  # type: ignore[union-attr]
        return best_fit_gpus(snapshot, node_index, job)

    # -- the step-level part -------------------------------------------------------------------
    def node_part(self, snapshot: ClusterSnapshot) -> Any:
        """The head's node term ``[N, hidden]`` for ``snapshot`` (recomputed per the module docstring)."""
        stale = snapshot is not self._snap or (not self._in_step and self._calls >= self.refresh_every)
        if stale:
            self._node_part = self.encode(snapshot)
            self._snap = snapshot
            self._calls = 0
            self._in_step = self._order_seen
            self._order_seen = False
        self._calls += 1
        return self._node_part

    def encode(self, snapshot: ClusterSnapshot) -> Any:
        import torch

        from inference.model.scorer import TorchTopology

        key = id(snapshot.table)
        topo = self._topologies.get(key)
        if topo is None or topo[0] is not snapshot.table:
            topo = self._topologies[key] = (snapshot.table, TorchTopology(build_topology(snapshot, self.spec,
                                                                                         self.loaded.config.knn)))
        nodes = torch.from_numpy(node_state(snapshot, self.spec))[None]
        queue = np.zeros(self.spec.job_dim, np.float32) if self._queue is None else self._queue
        with torch.inference_mode():
            return self.loaded.model.node_part(nodes, topo[1], torch.from_numpy(queue)[None])[0]

    def __repr__(self) -> str:
        what = f"fallback {self.fallback_name}: {self.fallback_reason}" if self.fell_back else self.model_version
        return f"<policy learned ({what})>"
