"""The embedded default: the scorer runs in the worker's own process (torch, CPU or CUDA).

**New versions without a restart.** ``model_dir`` is usually the ``models/latest`` symlink
that ``semsched train`` and promotion repoint. ``refresh()`` (called by the policy at the
start of a step, at most every ``watch_s`` seconds) resolves it again; when it points to
another directory the new version is loaded and swapped in between steps. A version that
fails to load is reported once (``reload_error``) and the current one keeps serving.

**Threads.** torch's intra-op threads for the process: ``SEMSCHED_TORCH_THREADS``, default the
CPUs the process may run on less one, at most 2, at least 1. The shape-factored head's step is a few large ops,
where a second thread takes the model call at 256 pending × 1,213 nodes from 5.0 to 3.0 ms on
an idle 2-core machine; but a worker shares its cores with its event loop, and in the embedded
stack with the broker and the agents: there, torch's threads spinning on every core during
each step's model call slowed the whole pipeline (``semsched bench pipeline --policy learned``
at 250 submissions/s on 2 cores: 186–188 jobs/s and a mean submit → command of 2.9–3.1 s with
2 threads, 189–199 jobs/s and 2.2–2.8 s with 1). One core is left to the rest.
``policy_async`` runs the model on one dedicated thread, always the same: model calls never
overlap (a step's and a warm-up's would compete for torch's threads), and the event loop keeps
serving while one runs. (On the idle machine a new thread's first call costs no more than
another's: 4 ms against 2–5 ms at 256 pending; it is not a warm-up matter.)
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from inference.backends.base import BackendError
from inference.encoders import EncoderCache, get_encoder
from inference.model.step import PolicyInputs, TopologyCache, run_policy

THREADS_ENV = "SEMSCHED_TORCH_THREADS"


def torch_threads() -> int:
    """The intra-op thread count the in-process backend uses (module docstring)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError as e:
            raise ValueError(f"{THREADS_ENV} must be a whole number of threads, not {raw!r}") from e
    try:
        cores = len(os.sched_getaffinity(0))  # the CPUs this process may run on (a container's share)
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(2, cores - 1))


class InProcessBackend:
    name = "in-process"
    computes_pairs = False  # run_policy reads the inputs' pairs

    def __init__(self, model_dir: Path | None = None, *, loaded: Any = None, watch_s: float = 2.0) -> None:
        import torch

        from inference.model.io import load_model

        torch.set_num_threads(torch_threads())
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.loaded = loaded if loaded is not None else load_model(self._require_dir())
        self.watch_s = watch_s
        self.reload_error: str | None = None
        self._checked = time.monotonic()
        self._refused: set[tuple[Path, int]] = set()  # versions not to load again (inference.model.io.reload_if_moved)
        self._topologies = TopologyCache()
        self._encoder = EncoderCache(get_encoder(self.loaded.config.spec.encoder))
        self._thread: ThreadPoolExecutor | None = None  # the model thread of policy_async, made at first use

    def _require_dir(self) -> Path:
        if self.model_dir is None:
            raise ValueError("InProcessBackend needs a model_dir or a loaded model")
        return self.model_dir

    @property
    def version(self) -> str:
        return str(self.loaded.version)

    def refresh(self, force: bool = False) -> bool:
        if self.model_dir is None or (not force and time.monotonic() - self._checked < self.watch_s):
            return False
        self._checked = time.monotonic()
        from inference.model.io import reload_if_moved, version_mark

        try:
            fresh = reload_if_moved(self.model_dir, self.loaded, refused=self._refused)
        except Exception as e:  # a missing link, a half-written or broken version: keep serving the current one
            self.reload_error = f"{self.model_dir}: {type(e).__name__}: {e}"
            return False
        if fresh is None:
            return False
        try:  # its encoder before it serves (found by review: the version swapped in, then this raised)
            encoder = (self._encoder if fresh.config.spec.encoder == self._encoder.name
                       else EncoderCache(get_encoder(fresh.config.spec.encoder)))  # fmt: skip
        except Exception as e:
            self._refused.add(version_mark(Path(fresh.path)))
            self.reload_error = f"{fresh.path}: {type(e).__name__}: {e}"
            return False
        self.loaded, self.reload_error, self._encoder = fresh, None, encoder
        return True

    def policy(self, inputs: PolicyInputs, deadline_ms: float | None = None) -> dict[str, Any]:
        """(``deadline_ms``: none here; this process's own work, bounded by the window.)"""
        try:
            out: dict[str, Any] = run_policy(self.loaded.model, inputs, self._topologies)
        except Exception as e:  # shapes that do not match this version's spec, say
            raise BackendError(f"in-process model failed: {type(e).__name__}: {e}") from e
        out["version"] = self.version
        return out

    async def policy_async(self, inputs: PolicyInputs) -> dict[str, Any]:
        # on the model thread: a step's model call takes milliseconds to a second, the event loop keeps serving
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semsched-model")
        return await asyncio.get_running_loop().run_in_executor(self._thread, self.policy, inputs)

    async def encode_async(self, cleaned_texts: Sequence[str]) -> np.ndarray:
        return self.encode(cleaned_texts)

    def encode(self, cleaned_texts: Sequence[str], deadline_ms: float | None = None) -> np.ndarray:
        return self._encoder.encoder.encode(list(cleaned_texts))

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None
