"""The ``predictor`` Triton model: job durations and (once the scorer has one) the transition T.

**Duration** — inputs ``TEXT_VEC`` f32 ``[D]`` (the duration model's encoder on
:func:`inference.duration.features.duration_text`) and ``SHAPE`` f32 ``[S]``
(:func:`inference.duration.features.shape_features`) per batch row → ``DURATION_S`` f32 ``[1]``:
the trained duration predictor (:mod:`inference.duration`, a ``models/duration/<version>/``
directory) answering in its configured mode — the MLP regression, the retrieval over the
finished jobs saved with the model, or their blend (without its per-key history: a feature row
names no job's request, app or program; ``SOURCE`` says so). The worker's own predictor also learns
online from jobs that finish after training; the served one answers with the saved index.
With no duration model the answer is NaN and ``SOURCE`` says ``absent: ...`` — no made-up
baseline.

**Transition** (k-step lookahead) — inputs ``H`` f32 ``[N, H]`` (a step's fusion-encoder node
embeddings, ``Scorer.encode``) and k actions ``ACTION_JOB`` f32 ``[k, Dj]``, ``ACTION_NODE``
i64 ``[k]``, ``ACTION_PAIR`` f32 ``[k, P]`` (each action's pair row) → ``H_NEXT`` f32 ``[N, H]``
= T applied k times (``Scorer.transition``), only when the served scorer has a transition
head. Without one such a request fails with "transition model absent" (the client raises
:class:`~inference.backends.base.BackendError`): nothing is invented.

An answer to one question fills the other's output with NaN (``H_NEXT`` then ``[1, 1]``).
Every answer has ``VERSION`` (the policy model's version) and ``SOURCE`` (what answered, e.g.
``duration blend <duration version>``).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from inference.serving.host import ModelHost
from inference.serving.models import version_rows
from inference.serving.repository import TensorSpec
from inference.serving.watcher import Watcher

log = logging.getLogger("semsched.serving")


TRANSITION_ORDER = ("H", "ACTION_JOB", "ACTION_NODE", "ACTION_PAIR")
TRANSITION_INPUTS = frozenset(TRANSITION_ORDER)


def has_transition(model: Any) -> bool:
    return getattr(model, "transition_head", None) is not None


def rollout(model: Any, h: np.ndarray, jobs: np.ndarray, nodes: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``h [N, H]`` after the k actions (``jobs [k, Dj]``, ``nodes [k]``, ``pairs [k, P]``), T applied in turn
    on the model's device."""
    import torch

    from inference.model.scorer import Action

    device = next(model.parameters()).device

    def t(a: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(device)

    if not (len(jobs) == len(nodes) == len(pairs)):
        raise ValueError(f"transition: {len(jobs)} jobs, {len(nodes)} nodes, {len(pairs)} pair rows")
    if len(nodes) and (nodes.min() < 0 or nodes.max() >= len(h)):
        raise ValueError("transition: an action's node is outside H")
    with torch.inference_mode():
        x = t(h)[None]
        for j, n, p in zip(jobs, nodes, pairs, strict=True):
            action = Action(t(j)[None], torch.tensor([int(n)], device=device), t(p)[None])
            x = model.transition(x, action)
        return x[0].cpu().numpy().astype(np.float32, copy=False)


def default_duration_dir(model_dir: Path) -> Path:
    """``models/duration/latest`` beside ``models/latest``."""
    return Path(model_dir).parent / "duration" / "latest"


def duration_seconds(predictor: Any, text: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """float64 ``[n]`` seconds from feature rows (:meth:`LearnedDurationPredictor.components_of`): as
    ``predictor.predict_many`` answers from the jobs, but for the per-key history of the ``blend``,
    which needs the job (its request, app or program), not its rows (:func:`served_mode`; a test keeps
    the two equal). Before, the rows' answer also left out the regression's validation shift (found
    by review: up to 2x off the model that was validated, under its version's name)."""
    n = len(text)
    if n == 0:
        return np.zeros(0)
    reg = (predictor.regressor.predict(np.concatenate([text, shape], axis=1)).astype(np.float64)
           if predictor.regressor is not None else np.full(n, np.nan))  # fmt: skip
    return np.exp(predictor.components_of(text, shape, reg).answer(predictor.config.mode))


def served_mode(predictor: Any) -> str:
    """What :func:`duration_seconds` answers, for ``SOURCE``: the config's mode, and whether the
    blend's per-key history is left out."""
    cfg = predictor.config
    no_history = cfg.mode == "blend" and cfg.history_weight > 0
    return f"{cfg.mode}{' without the per-key history (rows name no job)' if no_history else ''}"


class DurationHost:
    """The duration predictor in ``directory`` (a ``latest`` symlink), re-resolved every ``watch_s``."""

    def __init__(self, directory: Path | None, watch_s: float = 1.0) -> None:
        self.directory, self.watch_s = directory, watch_s
        #: (the predictor, why there is none or the last load failed): one tuple, read and replaced at once
        self.state: tuple[Any, str | None] = (None, "no duration model directory" if directory is None else None)
        self.path: Path | None = None
        self._checked = -float("inf")
        self._lock = threading.Lock()
        self._refused: set[tuple[Path, int]] = set()  # versions that did not load: not loaded again until rewritten
        self._watcher: Watcher | None = None
        self.current()

    @property
    def predictor(self) -> Any:
        return self.state[0]

    @property
    def error(self) -> str | None:
        return self.state[1]

    def watch(self) -> None:
        """Check ``directory`` every ``watch_s`` in a daemon thread, not in ``current()`` (a request's path)."""
        if self._watcher is None and self.directory is not None:
            self._watcher = Watcher(self._check, self.watch_s, "semsched-duration-watch")

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def current(self) -> Any:
        if self._watcher is None and self.directory is not None and time.monotonic() - self._checked >= self.watch_s:
            self._check()
        return self.predictor

    def _check(self) -> None:
        with self._lock:
            self._checked = time.monotonic()
            from inference.duration.io import load_predictor, version_mark

            mark = None
            try:
                target = self.directory.resolve(strict=True)
                if target != self.path and (mark := version_mark(target)) not in self._refused:
                    fresh = load_predictor(target)
                    self.state, self.path = (fresh, None), target
                    log.info("duration model %s (%s)", fresh.version, target)
            except Exception as e:  # absent or broken: keep what serves (maybe nothing)
                if mark is not None:  # (found by review: a broken version was loaded again every watch_s, on a
                    self._refused.add(mark)  # request's path)
                reason = f"{self.directory}: {type(e).__name__}: {e}"
                if reason != self.error and self.predictor is not None:
                    log.error("cannot load duration model, keeping %s: %s", self.predictor.version, reason)
                self.state = (self.predictor, reason)


class PredictorModel:
    """The ``predictor`` callable (see the module docstring)."""

    def __init__(self, host: ModelHost, duration_dir: Path | None = None, watch_s: float | None = None) -> None:
        self.host = host
        if duration_dir is None:  # (even before it exists: found by review, one published after the server
            duration_dir = default_duration_dir(host.model_dir)  # started was never served)
        self.duration = DurationHost(duration_dir, host.watch_s if watch_s is None else watch_s)

    @staticmethod
    def inputs() -> list[TensorSpec]:
        return [TensorSpec("TEXT_VEC", np.float32, (-1,), optional=True),
                TensorSpec("SHAPE", np.float32, (-1,), optional=True),
                TensorSpec("H", np.float32, (-1, -1), optional=True),
                TensorSpec("ACTION_JOB", np.float32, (-1, -1), optional=True),
                TensorSpec("ACTION_NODE", np.int64, (-1,), optional=True),
                TensorSpec("ACTION_PAIR", np.float32, (-1, -1), optional=True)]  # fmt: skip

    @staticmethod
    def outputs() -> list[TensorSpec]:
        return [TensorSpec("DURATION_S", np.float32, (1,)), TensorSpec("H_NEXT", np.float32, (-1, -1)),
                TensorSpec("VERSION", np.bytes_, (1,)), TensorSpec("SOURCE", np.bytes_, (1,))]  # fmt: skip

    def describe(self) -> str:
        p = self.duration.predictor
        dur = (f"duration {p.config.mode} {p.version} on cpu" if p is not None  # (its MLP is a CPU regressor)
               else f"duration absent ({self.duration.error})")  # fmt: skip
        has_t = has_transition(self.host.loaded.model)
        t = f"of {self.host.version} on {self.host.device}" if has_t else "absent (the scorer has no transition model)"
        return f"{dur}; transition {t}"

    def __call__(self, requests: list[Any]) -> list[dict[str, np.ndarray]]:
        loaded = self.host.current()
        return [self._one(r, loaded) for r in requests]

    def _one(self, request: Any, loaded: Any) -> dict[str, np.ndarray]:
        names = set(request.keys())
        if names >= TRANSITION_INPUTS:
            if not has_transition(loaded.model):
                raise ValueError(f"transition model absent: scorer version {loaded.version} has no transition head")
            h_next = np.stack([rollout(loaded.model, *(np.asarray(request[k][b]) for k in TRANSITION_ORDER))
                               for b in range(len(request["H"]))])  # fmt: skip
            rows = len(h_next)
            return {"DURATION_S": np.full((rows, 1), np.nan, np.float32), "H_NEXT": h_next,
                    "VERSION": version_rows(loaded.version, rows),
                    "SOURCE": np.array([[f"transition {loaded.version}".encode()]] * rows, dtype=np.object_)}  # fmt: skip
        if not {"TEXT_VEC", "SHAPE"} <= names:
            raise ValueError("predictor: send TEXT_VEC + SHAPE (duration) or H + ACTION_JOB + ACTION_NODE + ACTION_PAIR "
                             "(transition)")  # fmt: skip
        text = np.asarray(request["TEXT_VEC"], np.float32)
        shape = np.asarray(request["SHAPE"], np.float32)
        rows = len(text)
        self.duration.current()
        predictor, error = self.duration.state  # (one read: the watch thread may swap it, review)
        if predictor is None:
            seconds = np.full(rows, np.nan)
            source = f"absent: {error}"
        else:
            seconds = duration_seconds(predictor, text, shape)
            source = f"duration {served_mode(predictor)} {predictor.version}"
        return {"DURATION_S": seconds.astype(np.float32).reshape(rows, 1),
                "H_NEXT": np.full((rows, 1, 1), np.nan, np.float32),  # no zero-size tensors on the wire
                "VERSION": version_rows(loaded.version, rows),
                "SOURCE": np.array([[source.encode()]] * rows, dtype=np.object_)}  # fmt: skip
