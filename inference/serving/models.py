"""The Triton models' inference callables: numpy batches in, numpy out.

Each callable takes the batch's requests as ``{input name: array}`` (one per client call;
the dynamic batcher hands over several at once when they queue together;
:mod:`inference.serving.python_model` runs them in Triton's Python backend) and returns one dict
of outputs per request. Every answer has a ``VERSION`` output (bytes ``[1]`` per batch row): the model
version that computed it (:class:`~inference.serving.host.ModelHost` swaps versions in place).

- ``policy``: one scheduling step per batch row — the :class:`~inference.model.step.PolicyInputs`
  arrays under upper-case names (``NODES`` f32 ``[N, F]``, ``NEIGHBOURS`` i64 ``[N, K]``,
  ``GROUPS`` i64 ``[N]``, ``QUEUE`` f32 ``[Dj]``, ``JOBS`` f32 ``[J, Dj]``, ``WHICH`` i64 ``[J]``,
  and the pair features in one of two ways, see below), evaluated by
  :func:`~inference.model.step.run_policy`, the function the in-process backend runs: ``SCORES``
  f32 ``[J, N]``, ``NODE_PART`` f32 ``[N, W]`` and whatever else the served scorer's ``run_policy``
  returns (``COST``, ``DELTA`` once the scorer has those heads; the outputs are read from the
  model at start).
  **Pair features.** A request carries either ``PAIRS`` f32 ``[S, N, P]`` (the client computed
  them) or, when the inputs have a ``source``, the compact arrays they are computed from
  (:class:`~inference.features.node_arrays.NodeArrays`): ``NODE_CAPS`` i64 ``[N, 3]`` (cpu, memory,
  GPU count), ``NODE_FREE`` i64 ``[N, 2]`` (free cpu, memory), ``GPU_FREE`` i32 ``[N, G]`` (free milli
  per GPU, -1 padding) and ``SHAPES`` i64 ``[S, 4]`` (cpu, memory, GPU count, per-GPU milli of each
  distinct shape) — ~90 kB instead of ~3 MB at 51 shapes × 1,213 nodes. The server then computes
  ``PAIRS`` itself with the same code and keeps them from request to request
  (:class:`~inference.serving.pairs.ServedPairs`), so the scores are the same either way. All five
  are optional Triton inputs (a request's dict has only those it carries); a request with
  neither kind is refused. For a spec with FGD's workload columns a compact request also carries
  ``NODE_MODELS`` i32 ``[N]`` (index into ``MODEL_NAMES`` bytes ``[M]``, -1: none), ``HEALTHY`` bool
  ``[N]`` and ``SHAPE_MODELS`` i64 ``[S]`` (a bit mask over ``MODEL_NAMES`` of the GPU models each
  shape accepts; 0: any); a version with workload columns refuses a compact request without them.
  **Scored pairs.** A request may carry ``FITS`` bool ``[S, N]`` (where each shape fits by
  resources, :func:`inference.features.fits.shape_fits`; the client always sends it): the head
  then scores only those pairs, and the answer carries the scores of the fitting (job, node)
  pairs alone, row-major, as ``SCORES_FIT`` f32 ``[M]`` (``-inf`` elsewhere; ``SCORES`` is then a
  one-element dummy) — 0.2 MB instead of 1.24 at 256 pending × 1,213 nodes at 70 % load. A
  request without it gets ``SCORES`` whole (and a dummy ``SCORES_FIT``).
  A step's requests have their own N / J / S, so the batcher rarely merges two; the worker sends
  batch 1. A tensor with a zero-size dimension could not travel through PyTriton, which served
  these models before, so two empty cases travel encoded (:func:`to_wire` / :func:`from_wire`): a label topology (``K = 0``) as one ``NEIGHBOURS``
  column of -1, a step without jobs as one zero ``JOBS`` row, one zero ``PAIRS`` shape (or
  ``SHAPES`` row) and ``WHICH = [-1]``; the answer's ``SCORES`` then has one dummy row the client
  drops.
- ``job_encoder``: ``TEXT`` bytes ``[1]`` per row (a cleaned job text, UTF-8) → ``EMBEDDING`` f32
  ``[D]`` with the text encoder the serving version's feature spec names. All rows of all queued
  requests are encoded in one call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

import numpy as np

from inference.features.node_arrays import NodeArrays
from inference.model.step import PolicyInputs, TopologyCache, run_policy
from inference.serving.host import ModelHost
from inference.serving.pairs import ServedPairs

log = logging.getLogger("semsched.serving")

#: the ``policy`` model's inputs: ``{NAME: (dtype, rank without the batch dimension, optional)}``
POLICY_INPUTS: dict[str, tuple[type, int, bool]] = {
    "NODES": (np.float32, 2, False), "NEIGHBOURS": (np.int64, 2, False), "GROUPS": (np.int64, 1, False),
    "QUEUE": (np.float32, 1, False), "JOBS": (np.float32, 2, False), "WHICH": (np.int64, 1, False),
    "PAIRS": (np.float32, 3, True),
    "NODE_CAPS": (np.int64, 2, True), "NODE_FREE": (np.int64, 2, True), "GPU_FREE": (np.int32, 2, True),
    "SHAPES": (np.int64, 2, True),
    "NODE_MODELS": (np.int32, 1, True), "MODEL_NAMES": (np.bytes_, 1, True), "HEALTHY": (np.bool_, 1, True),
    "SHAPE_MODELS": (np.int64, 1, True), "FITS": (np.bool_, 2, True),
}  # fmt: skip
#: the answer's scores on the fitting pairs only (a request with ``FITS``; module docstring)
SCORES_FIT = "SCORES_FIT"
#: the compact inputs' Triton names -> the :class:`NodeArrays` fields
COMPACT = {"NODE_CAPS": "caps", "NODE_FREE": "free", "GPU_FREE": "gpu_free", "SHAPES": "shapes"}
#: and the ones FGD's workload columns need besides
COMPACT_FGD = {"NODE_MODELS": "models", "MODEL_NAMES": "model_names", "HEALTHY": "healthy",
               "SHAPE_MODELS": "shape_models"}  # fmt: skip


def to_wire(inputs: PolicyInputs) -> dict[str, np.ndarray]:
    """The step's arrays under their Triton names: ``PAIRS``, or the compact arrays when the inputs
    have a ``source``; empty dimensions encoded (module docstring)."""
    a = inputs.arrays()
    n = len(a["nodes"])
    if a["neighbours"].shape[1] == 0:
        a["neighbours"] = np.full((n, 1), -1, np.int64)
    source = inputs.source
    if source is not None:
        del a["pairs"]
        arrays = source.arrays()
        a.update({wire.lower(): arrays[name] for wire, name in (COMPACT | COMPACT_FGD).items() if name in arrays})
    if len(a["jobs"]) == 0:
        a["jobs"] = np.zeros((1, a["jobs"].shape[1]), np.float32)
        if source is None:
            a["pairs"] = np.zeros((1, n, a["pairs"].shape[2]), np.float32)
        else:
            a["shapes"] = np.zeros((1, 4), np.int64)
            if source.fgd:
                a["shape_models"] = np.zeros(1, np.int64)
        if "fits" in a:
            a["fits"] = np.zeros((1, n), bool)
        a["which"] = np.full(1, -1, np.int64)
    return {name.upper(): value for name, value in a.items()}


def from_wire(arrays: dict[str, np.ndarray],
              pairs_for: Callable[[NodeArrays], np.ndarray] | None = None) -> PolicyInputs:  # fmt: skip
    """:class:`PolicyInputs` from one batch row of a request (validated by ``from_arrays``).
    A compact request's pair features are ``pairs_for(source)`` (the server's
    :class:`~inference.serving.pairs.ServedPairs` with the served spec)."""
    a = {name.lower(): value for name, value in arrays.items()}
    nbr = a["neighbours"]
    if nbr.ndim == 2 and nbr.shape[1] == 1 and len(nbr) and (nbr == -1).all():
        a["neighbours"] = nbr[:, :0]
    source = None
    if "pairs" not in a:
        missing = [name for name in COMPACT if name.lower() not in a]
        if missing:
            raise ValueError(f"policy request without PAIRS needs {', '.join(COMPACT)}; missing {', '.join(missing)}")
        if pairs_for is None:
            raise ValueError("policy request without PAIRS: computing them needs the served spec (pairs_for)")
        source = NodeArrays.from_arrays({name: a.pop(wire.lower()) for wire, name in (COMPACT | COMPACT_FGD).items()
                                         if wire.lower() in a})  # fmt: skip
    which = a["which"]
    if which.shape == (1,) and which[0] == -1:
        a["jobs"], a["which"] = a["jobs"][:0], which[:0]
        if "fits" in a:
            a["fits"] = a["fits"][:0]
        if source is None:
            a["pairs"] = a["pairs"][:0]
        else:
            source = replace(source, shapes=source.shapes[:0],
                             shape_models=None if source.shape_models is None else source.shape_models[:0])  # fmt: skip
    if source is not None:
        a["pairs"] = pairs_for(source)  # type: ignore[misc]
    return PolicyInputs.from_arrays(a, source)


def pack_scores(out: dict[str, np.ndarray], inputs: PolicyInputs) -> dict[str, np.ndarray]:
    """The answer's scores as they travel: for a request with ``fits``, only the fitting (job, node)
    pairs' (``SCORES_FIT``, row-major; the others are ``-inf``) and a dummy ``SCORES`` — a fifth of
    the bytes at 70 % load; else ``SCORES`` whole and a dummy ``SCORES_FIT``. (A zero-size tensor
    cannot travel: the dummies are one element; :func:`unpack_scores` reverses this.)"""
    out = dict(out)
    if inputs.fits is None:
        out[SCORES_FIT.lower()] = np.zeros(1, np.float32)
        return out
    fit = out.pop("scores")[inputs.fits[inputs.which]] if len(inputs.jobs) else np.zeros(0, np.float32)
    out[SCORES_FIT.lower()] = fit if len(fit) else np.zeros(1, np.float32)
    out["scores"] = np.zeros((1, 1), np.float32)
    return out


def unpack_scores(out: dict[str, Any], inputs: PolicyInputs) -> dict[str, Any]:
    """:func:`pack_scores` reversed on the client (``inputs``: the request it sent)."""
    packed = out.pop(SCORES_FIT.lower(), None)
    if inputs.fits is None or packed is None:
        return out
    mask = inputs.fits[inputs.which]  # [J, N]
    m = int(np.count_nonzero(mask))
    if len(packed) < m:
        raise ValueError(f"{SCORES_FIT} has {len(packed)} scores for {m} fitting pairs")
    scores = np.full(mask.shape, -np.inf, np.float32)
    scores[mask] = packed[:m]
    out["scores"] = scores
    return out


def stack_rows(rows: list[np.ndarray]) -> np.ndarray:
    """The batch rows of one output, stacked (rows of different lengths, packed scores, padded with NaN)."""
    if len({r.shape for r in rows}) == 1:
        return np.stack(rows)
    out = np.full((len(rows), max(len(r) for r in rows)), np.nan, np.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


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
    ranks = {key.upper(): (np.asarray(value).dtype.type, np.asarray(value).ndim) for key, value in out.items()}
    return ranks | {SCORES_FIT: (np.float32, 1)}


class PolicyModel:
    """The ``policy`` callable: ``run_policy`` per batch row, on the host's serving version (the
    pair features of a compact request computed here, kept from request to request)."""

    def __init__(self, host: ModelHost, bound: Collection[str] | None = None) -> None:
        """``bound``: the output names Triton's configuration of this model holds (the stub's start: a version
        with other outputs cannot serve, found by review: ``latest`` moved between the repository's writing
        and the stub's load, and the guard compared new versions with the wrong list)."""
        self.host = host
        self.outputs = policy_output_ranks(host.loaded)
        if bound is not None and set(self.outputs) != set(bound) - {"VERSION"}:
            raise RuntimeError(f"model version {host.version}'s policy outputs {sorted(self.outputs)} are not the "
                               f"{sorted(set(bound) - {'VERSION'})} Triton was configured with (latest moved while "
                               "semsched serve started): start it again")  # fmt: skip
        host.guard(self._same_outputs)
        self._topologies = TopologyCache()
        self.pairs = ServedPairs()
        self._lock = threading.Lock()  # one step at a time: torch runs single-threaded here anyway

    def _same_outputs(self, loaded: Any) -> str | None:
        """A version whose outputs differ (heads added or removed) cannot be swapped in: Triton's
        model configuration was bound with these outputs. Restart ``semsched serve`` for it."""
        theirs = policy_output_ranks(loaded)
        if theirs != self.outputs:
            return (f"its policy outputs {sorted(theirs)} differ from the served {sorted(self.outputs)}: "
                    "restart semsched serve to serve it")
        return None

    one_at_a_time = True  # each request a whole step: Triton's stub checks its caller is still waiting first

    def __call__(self, requests: list[Any]) -> list[dict[str, np.ndarray]]:
        loaded = self.host.current()
        answers = []
        for request in requests:
            rows = int(request["NODES"].shape[0])
            results = []
            for b in range(rows):
                row = {name: request[name][b] for name in POLICY_INPUTS if name in request}
                with self._lock:  # (the pair cache too)
                    inputs = from_wire(row, lambda source: self.pairs(source, loaded.config.spec))
                    out = run_policy(loaded.model, inputs, self._topologies)
                if len(inputs.jobs) == 0:  # a zero-size tensor cannot travel: one dummy row (dropped by the client)
                    out = {k: (np.zeros((1, *v.shape[1:]), v.dtype) if v.shape[:1] == (0,) else v) for k, v in out.items()}
                results.append(pack_scores(out, inputs))
            answer = {name: stack_rows([r[name.lower()] for r in results]) for name in self.outputs}
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
    """The ``job_encoder`` callable: every queued text in one ``encode`` call, with the encoder of the
    version it answers under (a new version's is built before it serves, beside the current one's)."""

    def __init__(self, host: ModelHost, device: str = "cpu",
                 encoder_factory: Callable[[str, str], Any] = make_encoder) -> None:  # fmt: skip
        self.host, self.device, self.factory = host, device, encoder_factory
        name = host.loaded.config.spec.encoder
        self._encoders = {name: encoder_factory(name, device)}
        self._newest = str(host.loaded.version)  # the version swapped in last: once it answers, older encoders go
        self._lock, self._swap_lock = threading.Lock(), threading.Lock()
        host.on_swap(self._swapped)
        host.on_refuse(self._not_swapped)

    @property
    def encoder_name(self) -> str:
        return str(self.host.loaded.config.spec.encoder)

    def _swapped(self, loaded: Any) -> None:
        """Before ``loaded`` serves: its encoder beside the serving version's (found by review: replacing it
        here, while the host's watch thread swaps, encoded requests still answered under the old version with
        the new encoder); any older one is let go."""
        name, serving = loaded.config.spec.encoder, self.encoder_name
        new = self._encoders.get(name) or self.factory(name, self.device)
        with self._swap_lock:
            self._encoders = {serving: self._encoders[serving], name: new}
            self._newest = str(loaded.version)

    def _not_swapped(self, loaded: Any) -> None:
        """``loaded`` was prepared and then refused (another model of the server refused it): its encoder goes."""
        with self._swap_lock:
            serving = self.encoder_name
            if str(loaded.version) == self._newest and serving in self._encoders:
                self._encoders = {serving: self._encoders[serving]}
                self._newest = str(self.host.loaded.version)

    def _release_older(self, loaded: Any) -> None:
        """Once the version swapped in last answers, the serving one before it no longer will: its encoder
        goes (found by review: it stayed resident until the next swap, a second MiniLM on a GPU)."""
        with self._swap_lock:
            if len(self._encoders) > 1 and str(loaded.version) == self._newest:
                name = loaded.config.spec.encoder
                self._encoders = {name: self._encoders[name]}

    def __call__(self, requests: list[Any]) -> list[dict[str, np.ndarray]]:
        loaded = self.host.current()
        name = loaded.config.spec.encoder
        # (gone only if, between current() and here, a newer version swapped in and answered: built again then)
        encoder = self._encoders.get(name) or self.factory(name, self.device)
        self._release_older(loaded)
        texts = [np.asarray(r["TEXT"]).reshape(-1) for r in requests]
        flat = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for rows in texts for t in rows]
        with self._lock:
            vectors = np.asarray(encoder.encode(flat), dtype=np.float32)
        answers, start = [], 0
        for rows in texts:
            answers.append({"EMBEDDING": vectors[start:start + len(rows)],
                            "VERSION": version_rows(loaded.version, len(rows))})  # fmt: skip
            start += len(rows)
        return answers
