"""The Triton models' inference callables: numpy batches in, numpy out.

Each callable takes PyTriton's list of requests (one per client call; the dynamic batcher
hands over several at once when they queue together) and returns one dict of outputs per
request. Every answer has a ``VERSION`` output (bytes ``[1]`` per batch row): the model
version that computed it (:class:`~inference.serving.host.ModelHost` swaps versions in place).

- ``policy``: one scheduling step per batch row — the :class:`~inference.model.step.PolicyInputs`
  arrays under upper-case names (``NODES`` f32 ``[N, F]``, ``NEIGHBOURS`` i64 ``[N, K]``,
  ``GROUPS`` i64 ``[N]``, ``QUEUE`` f32 ``[Dj]``, ``JOBS`` f32 ``[J, Dj]``, ``PAIRS`` f32
  ``[S, N, P]``, ``WHICH`` i64 ``[J]``), evaluated by :func:`~inference.model.step.run_policy`,
  the function the in-process backend runs: ``SCORES`` f32 ``[J, N]``, ``NODE_PART`` f32 ``[N, W]``
  and whatever else the served scorer's ``run_policy`` returns (``COST``, ``DELTA`` once the
  scorer has those heads; the outputs are read from the model at start).
  A step's requests have their own N / J / S, so the batcher rarely merges two; the worker sends
  batch 1. PyTriton cannot carry a tensor with a zero-size dimension, so two empty cases travel
  encoded (:func:`to_wire` / :func:`from_wire`): a label topology (``K = 0``) as one ``NEIGHBOURS``
  column of -1, a step without jobs as one zero ``JOBS`` row, one zero ``PAIRS`` shape and
  ``WHICH = [-1]``; the answer's ``SCORES`` then has one dummy row the client drops.
- ``job_encoder``: ``TEXT`` bytes ``[1]`` per row (a cleaned job text, UTF-8) → ``EMBEDDING`` f32
  ``[D]`` with the text encoder the serving version's feature spec names. All rows of all queued
  requests are encoded in one call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from inference.model.step import PolicyInputs, TopologyCache, run_policy
from inference.serving.host import ModelHost

log = logging.getLogger("semsched.serving")

POLICY_INPUTS: dict[str, tuple[type, int]] = {
    name.upper(): (dtype, {"nodes": 2, "neighbours": 2, "groups": 1, "queue": 1, "jobs": 2, "pairs": 3,
                           "which": 1}[name])
    for name, dtype in PolicyInputs.DTYPES.items()
}  # fmt: skip


def to_wire(inputs: PolicyInputs) -> dict[str, np.ndarray]:
    """The step's arrays under their Triton names, empty dimensions encoded (module docstring)."""
    a = inputs.arrays()
    n = len(a["nodes"])
    if a["neighbours"].shape[1] == 0:
        a["neighbours"] = np.full((n, 1), -1, np.int64)
    if len(a["jobs"]) == 0:
        a["jobs"] = np.zeros((1, a["jobs"].shape[1]), np.float32)
        a["pairs"] = np.zeros((1, n, a["pairs"].shape[2]), np.float32)
        a["which"] = np.full(1, -1, np.int64)
    return {name.upper(): value for name, value in a.items()}


def from_wire(arrays: dict[str, np.ndarray]) -> PolicyInputs:
    """:class:`PolicyInputs` from one batch row of a request (validated by ``from_arrays``)."""
    a = {name.lower(): value for name, value in arrays.items()}
    nbr = a["neighbours"]
    if nbr.ndim == 2 and nbr.shape[1] == 1 and len(nbr) and (nbr == -1).all():
        a["neighbours"] = nbr[:, :0]
    which = a["which"]
    if which.shape == (1,) and which[0] == -1:
        a["jobs"], a["pairs"], a["which"] = a["jobs"][:0], a["pairs"][:0], which[:0]
    return PolicyInputs.from_arrays(a)


def version_rows(version: str, rows: int) -> np.ndarray:
    return np.array([[version.encode()]] * rows, dtype=np.object_)


def probe_inputs(spec: Any, nodes: int = 3, jobs: int = 2) -> PolicyInputs:
    """A tiny valid step for ``spec`` (to read a model's outputs and warm it up)."""
    return PolicyInputs(nodes=np.zeros((nodes, spec.node_dim), np.float32),
                        neighbours=np.zeros((nodes, 0), np.int64), groups=np.zeros(nodes, np.int64),
                        queue=np.zeros(spec.job_dim, np.float32), jobs=np.zeros((jobs, spec.job_dim), np.float32),
                        pairs=np.zeros((1, nodes, spec.pair_dim), np.float32),
                        which=np.zeros(jobs, np.int64))  # fmt: skip


def policy_output_ranks(loaded: Any) -> dict[str, tuple[Any, int]]:
    """``{OUTPUT_NAME: (dtype, ndim)}`` of ``run_policy`` on ``loaded`` (without the batch dimension)."""
    out = run_policy(loaded.model, probe_inputs(loaded.config.spec))
    return {key.upper(): (np.asarray(value).dtype.type, np.asarray(value).ndim) for key, value in out.items()}


class PolicyModel:
    """The ``policy`` callable: ``run_policy`` per batch row, on the host's serving version."""

    def __init__(self, host: ModelHost) -> None:
        self.host = host
        self.outputs = policy_output_ranks(host.loaded)
        host.guard(self._same_outputs)
        self._topologies = TopologyCache()
        self._lock = threading.Lock()  # one step at a time: torch runs single-threaded here anyway

    def _same_outputs(self, loaded: Any) -> str | None:
        """A version whose outputs differ (heads added or removed) cannot be swapped in: Triton's
        model configuration was bound with these outputs. Restart ``semsched serve`` for it."""
        theirs = policy_output_ranks(loaded)
        if theirs != self.outputs:
            return (f"its policy outputs {sorted(theirs)} differ from the served {sorted(self.outputs)}: "
                    "restart semsched serve to serve it")
        return None

    def __call__(self, requests: list[Any]) -> list[dict[str, np.ndarray]]:
        loaded = self.host.current()
        answers = []
        for request in requests:
            rows = int(request["NODES"].shape[0])
            results = []
            for b in range(rows):
                inputs = from_wire({name: request[name][b] for name in POLICY_INPUTS})
                with self._lock:
                    out = run_policy(loaded.model, inputs, self._topologies)
                if len(inputs.jobs) == 0:  # a zero-size tensor cannot travel: one dummy row (dropped by the client)
                    out = {k: (np.zeros((1, *v.shape[1:]), v.dtype) if v.shape[:1] == (0,) else v) for k, v in out.items()}
                results.append(out)
            answer = {name: np.stack([r[name.lower()] for r in results]) for name in self.outputs}
            answer["VERSION"] = version_rows(loaded.version, rows)
            answers.append(answer)
        return answers


def make_encoder(name: str, device: str) -> Any:
    """The text encoder ``name`` (a feature spec's), MiniLM on ``device``."""
    from inference.encoders import get_encoder

    if name in ("minilm", "all-MiniLM-L6-v2"):
        from inference.encoders.minilm import MiniLMEncoder

        return MiniLMEncoder(device=device)
    return get_encoder(name)


class JobEncoderModel:
    """The ``job_encoder`` callable: every queued text in one ``encode`` call."""

    def __init__(self, host: ModelHost, device: str = "cpu",
                 encoder_factory: Callable[[str, str], Any] = make_encoder) -> None:  # fmt: skip
        self.host, self.device, self.factory = host, device, encoder_factory
        self.encoder_name = host.loaded.config.spec.encoder
        self.encoder = encoder_factory(self.encoder_name, device)
        self._lock = threading.Lock()
        host.on_swap(self._swapped)

    def _swapped(self, loaded: Any) -> None:
        name = loaded.config.spec.encoder
        if name != self.encoder_name:
            self.encoder, self.encoder_name = self.factory(name, self.device), name

    def __call__(self, requests: list[Any]) -> list[dict[str, np.ndarray]]:
        loaded = self.host.current()
        texts = [np.asarray(r["TEXT"]).reshape(-1) for r in requests]
        flat = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for rows in texts for t in rows]
        with self._lock:
            vectors = np.asarray(self.encoder.encode(flat), dtype=np.float32)
        answers, start = [], 0
        for rows in texts:
            answers.append({"EMBEDDING": vectors[start:start + len(rows)],
                            "VERSION": version_rows(loaded.version, len(rows))})  # fmt: skip
            start += len(rows)
        return answers
