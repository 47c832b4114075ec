"""One step's backend calls: the texts not yet embedded, the inputs, then the model, with the
pair features overlapped where the backend allows it.

The step's new job texts are embedded by the backend (Triton's ``job_encoder``) when the
model's encoder is worth serving there (MiniLM, ``serve_remotely``); the hashed encoder costs
less than that round trip and embeds them here, in ``build_inputs``.

The policy needs the step-start pair features itself: in-step re-scoring reads them. A backend
that computes them from the request's compact node arrays (Triton, ``computes_pairs``) does not
need them in the request. So the request goes out first, and this process computes its own copy
on a helper thread while the answer travels: the two overlap instead of adding up. An
in-process backend needs the pairs before it can run, so for it they come first.

A remote backend bounds the whole of it with its step deadline (:meth:`StepCaller.within`);
half of what is left of that deadline after the answer goes to embedding the new texts of the
queue past the call's window, so that the windows the step opens find them; the other half is
theirs (:mod:`inference.step_budget`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from inference.backends.base import BackendError
from inference.encoders import EncoderCache
from inference.features.jobs import JobRows
from inference.features.pair_cache import PairCache
from inference.features.spec import FeatureSpec
from inference.model.step import PolicyInputs, build_inputs, pair_rows, step_shapes
from inference.step_budget import MIN_CALL_MS
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

EMBED_CHUNK = 256  # texts per embedding request


class StepCaller:
    """Calls a backend for one step (:meth:`__call__`); owns the one helper thread the overlap uses."""

    def __init__(self) -> None:
        self._thread: ThreadPoolExecutor | None = None

    async def __call__(self, backend: Any, snapshot: ClusterSnapshot, jobs: Sequence[JobRequest], now: float,
                       spec: FeatureSpec, encoder: EncoderCache, *, knn: int = 8, queue: np.ndarray | None = None,
                       pair_cache: PairCache | None = None, job_rows: JobRows | None = None,
                       utilisation: np.ndarray | None = None) -> tuple[PolicyInputs, dict[str, Any]]:  # fmt: skip
        """``(inputs, answer)``: :func:`~inference.model.step.build_inputs` (with ``pairs`` always
        set) and the backend's ``policy_async`` answer. ``snapshot`` and ``pair_cache`` must not
        change until it returns."""
        if encoder.serve_remotely:
            await embed_texts(backend, encoder, [j.text for j in jobs])
        overlap = bool(getattr(backend, "computes_pairs", False))
        inputs = build_inputs(snapshot, jobs, now, spec, encoder, knn=knn, queue=queue, pair_cache=pair_cache,
                              pairs=not overlap, job_rows=job_rows, utilisation=utilisation)  # fmt: skip
        if inputs.pairs is not None:  # in-process, or no compact arrays (the request carries the pairs)
            return inputs, await backend.policy_async(inputs)
        call = asyncio.ensure_future(backend.policy_async(inputs))
        computed = asyncio.get_running_loop().run_in_executor(self._executor(), _pairs, jobs, snapshot, spec,
                                                              pair_cache)  # fmt: skip
        try:
            rows = await asyncio.shield(computed)
        except BaseException:  # a failure, or this step cancelled: the call goes, the thread is waited for
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            with contextlib.suppress(BaseException):  # it may still be writing the pair cache
                await computed
            raise
        return replace(inputs, pairs=rows), await call

    async def within(self, budget_ms: float | None, backend: Any, snapshot: ClusterSnapshot,
                     jobs: Sequence[JobRequest], rest: Sequence[JobRequest], now: float, spec: FeatureSpec,
                     encoder: EncoderCache, **kwargs: Any) -> tuple[PolicyInputs, dict[str, Any]]:  # fmt: skip
        """:meth:`__call__` for ``jobs`` (the step's first window) within ``budget_ms`` (a remote backend's
        bound on the whole step; ``None``: no bound), a :class:`BackendError` past it; then, in half of
        what is left of it, a served encoder (MiniLM on Triton) embeds the new texts of ``rest`` (the
        queue past the window). What does not fit waits for the next step (chunks are kept as they
        come), and the windows the step opens embed the rest themselves. The answer is in by then:
        nothing in that second part fails the step."""
        started = time.monotonic()
        work = self(backend, snapshot, jobs, now, spec, encoder, **kwargs)
        try:
            out = await (asyncio.wait_for(work, budget_ms / 1000.0) if budget_ms else work)
        except TimeoutError:
            raise BackendError(f"{backend.name}: the step's calls took over its {budget_ms:g} ms "
                               "step deadline") from None  # fmt: skip
        # half of what is left at most: the other half stays for the windows the step opens (inference/step_budget.py)
        left = (budget_ms / 1000.0 - (time.monotonic() - started)) / 2 if budget_ms else None
        if rest and encoder.serve_remotely and (left is None or left > 0):
            ahead = embed_texts(backend, encoder, [j.text for j in rest])
            try:
                await (asyncio.wait_for(ahead, left) if left is not None else ahead)
            except Exception as e:  # out of time, or the server refused: the windows embed what is missing
                log.debug("embedding the queue past the window stopped: %s: %s", type(e).__name__, e)
        return out

    def _executor(self) -> ThreadPoolExecutor:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semsched-pairs")
        return self._thread

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None


async def embed_texts(backend: Any, encoder: EncoderCache, texts: Sequence[str]) -> None:
    """Have ``backend`` embed the texts ``encoder`` does not hold yet, ``EMBED_CHUNK`` at a time, each
    chunk kept as it comes: a deadline that cuts in keeps what came, and the next step goes on
    from there instead of starting over."""
    missing = encoder.missing(texts)
    encoder.reserve(texts)  # room for them all at once: a chunk's put then pushes out nothing of this call
    for lo in range(0, len(missing), EMBED_CHUNK):
        part = missing[lo : lo + EMBED_CHUNK]
        encoder.put(part, await backend.encode_async(part))


def embed_texts_now(backend: Any, encoder: EncoderCache, texts: Sequence[str], left_ms: Callable[[], float]) -> None:
    """:func:`embed_texts` for a window the step opens, synchronously (in ``schedule_step``), each chunk
    within what ``left_ms()`` says is left of the step's deadline then (:mod:`inference.step_budget`),
    and kept as it comes."""
    missing = encoder.missing(texts)
    encoder.reserve(texts)
    for lo in range(0, len(missing), EMBED_CHUNK):
        if (left := left_ms()) < MIN_CALL_MS:
            raise BackendError(f"{backend.name}: the step's deadline ran out with {len(missing) - lo} texts to embed")
        part = missing[lo : lo + EMBED_CHUNK]
        encoder.put(part, backend.encode(part, deadline_ms=left))


def _pairs(jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, spec: FeatureSpec,
           pair_cache: PairCache | None) -> np.ndarray:  # fmt: skip
    return pair_rows(step_shapes(jobs, spec)[0], snapshot, spec, pair_cache)
