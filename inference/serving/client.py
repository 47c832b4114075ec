"""``TritonBackend``: the learned policy's model calls on a Triton server (gRPC, with a deadline).

Implements :class:`inference.backends.base.Backend`. Settings (keyword arguments win):

- ``SEMSCHED_TRITON_URL`` — the server's gRPC endpoint (default ``localhost:8001``);
- ``SEMSCHED_TRITON_DEADLINE_MS`` — the deadline of one step's ``policy`` call (default 500 ms: on 2 shared CPU cores
  the current model's call alone takes ~0.1 s for 64 pending x 1,213 nodes, ~1 s for 1,024, see
  ``semsched bench triton``; a step that misses it is decided by the fallback);
- ``SEMSCHED_TRITON_ENCODE_DEADLINE_MS`` — of a ``job_encoder`` call (default 500 ms: new texts
  only, in chunks of at most 256);
- ``SEMSCHED_TRITON_STEP_DEADLINE_MS`` — of all a step's calls together, the new texts' encoding
  and the policy call (default twice the policy call's deadline, 1,000 ms; ``0`` = none): however
  many chunks a step has to encode, it waits this long at most before the fallback decides it
  (:meth:`inference.policy.LearnedPolicy.prepare_step`); the windows the step opens later share
  what is left of it (:mod:`inference.step_budget`);
- ``SEMSCHED_TRITON_SHARED_MEMORY`` — ``auto`` (default): the policy call's tensors go through a
  shared-memory region when the server maps it (same host, :mod:`inference.serving.shared_memory`),
  else in the gRPC message; ``off``: always in the message.

Any failure — the server down (``UNAVAILABLE``), the deadline missed (``DEADLINE_EXCEEDED``),
an error from the model, an answer without the expected outputs — raises
:class:`~inference.backends.base.BackendError` with a reason naming it; the policy then
decides the step with its fallback heuristic and the decision records say so.

**The local copy** (``loaded``): the serving version's feature spec and head, kept in step with
the server's answers and with ``model_dir`` (:mod:`inference.serving.local_copy`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inference.backends.base import BackendError
from inference.model.step import PolicyInputs
from inference.serving.local_copy import LocalCopy
from inference.serving.policy_call import Flow, Op, make_inputs, policy_flow
from inference.serving.repository import MAX_BATCH
from inference.serving.shared_memory import SharedMemoryLane, lane_setting
from inference.step_budget import STEP_DEADLINE_ENV

log = logging.getLogger("semsched.serving")

URL_ENV = "SEMSCHED_TRITON_URL"
DEADLINE_ENV = "SEMSCHED_TRITON_DEADLINE_MS"
ENCODE_DEADLINE_ENV = "SEMSCHED_TRITON_ENCODE_DEADLINE_MS"
ENCODE_CHUNK = MAX_BATCH["job_encoder"]  # texts per job_encoder request
#: gRPC statuses of a call the server did not answer itself (late, out of reach, called off): they say
#: nothing of the version it serves (:meth:`LocalCopy.call_failed`)
UNANSWERED = ("DEADLINE_EXCEEDED", "UNAVAILABLE", "CANCELLED")
DEFAULT_DEADLINE_MS = 500.0  # of one step's policy call and of a job_encoder call (module docstring)


def _env_float(name: str, default: float, *, zero: str = "") -> float:
    """A deadline in ms from the environment; ``zero``: what 0 means, when it is allowed."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value > 0 or (zero and value == 0))):
        allowed = f"above 0 (0: {zero})" if zero else "above 0"
        raise ValueError(f"{name} must be a number of milliseconds {allowed}, not {raw!r}")
    return value


def check_environment() -> None:
    """Read the ``SEMSCHED_TRITON_*`` deadlines as :class:`TritonBackend` will; ``ValueError`` names a
    bad one (a worker checks them at start: a typo must not turn every step into a fallback)."""
    deadline = _env_float(DEADLINE_ENV, DEFAULT_DEADLINE_MS)
    _env_float(ENCODE_DEADLINE_ENV, DEFAULT_DEADLINE_MS)
    _env_float(STEP_DEADLINE_ENV, 2 * deadline, zero="none")
    lane_setting()


def server_timeout_us(deadline_ms: float) -> int | None:
    """The request's timeout for Triton's queue (microseconds; None: no deadline): a request still queued
    when its caller's deadline has passed is rejected there instead of run (the models' queue policy,
    :func:`inference.serving.repository.config_pbtxt`)."""
    return max(1, int(deadline_ms * 1000)) if 0 < deadline_ms < math.inf else None


def _advance(flow: Flow, reply: Any, error: BackendError | None) -> tuple[bool, Any]:
    """``(True, the flow's result)`` once it returns, else ``(False, its next Op)``."""
    try:
        return False, (flow.throw(error) if error is not None else flow.send(reply))
    except StopIteration as stop:
        return True, stop.value
    except BackendError:
        raise
    except Exception as e:  # the flow's own code (not an op): the step falls back and says why
        raise BackendError(f"triton call failed: {type(e).__name__}: {e}") from e


def _text_chunks(texts: Sequence[str]) -> list[np.ndarray]:
    """``job_encoder`` requests' ``TEXT`` tensors, ``ENCODE_CHUNK`` texts at most each."""
    texts = list(texts)
    return [np.array([[t.encode("utf-8")] for t in texts[lo : lo + ENCODE_CHUNK]], dtype=np.object_)
            for lo in range(0, len(texts), ENCODE_CHUNK)]  # fmt: skip


def _outputs_of(op: Op, reply: Any) -> Any:
    """An ``outputs`` op's answer: the model's output names (from its metadata)."""
    return [o.name for o in reply.outputs] if op.kind == "outputs" else reply


class TritonBackend:
    name = "triton"
    computes_pairs = True  # a request with compact node arrays: the server computes the pairs

    def __init__(self, model_dir: Path | None = None, *, url: str | None = None, deadline_ms: float | None = None,
                 encode_deadline_ms: float | None = None, step_deadline_ms: float | None = None, loaded: Any = None,
                 watch_s: float = 2.0, shared_memory: str | None = None) -> None:  # fmt: skip
        self.local = LocalCopy(model_dir, loaded, watch_s)
        self.url = url or os.environ.get(URL_ENV) or "localhost:8001"
        self.deadline_ms = deadline_ms if deadline_ms is not None else _env_float(DEADLINE_ENV, DEFAULT_DEADLINE_MS)
        self.encode_deadline_ms = (encode_deadline_ms if encode_deadline_ms is not None
                                   else _env_float(ENCODE_DEADLINE_ENV, DEFAULT_DEADLINE_MS))  # fmt: skip
        step = (step_deadline_ms if step_deadline_ms is not None
                else _env_float(STEP_DEADLINE_ENV, 2 * self.deadline_ms, zero="none"))  # fmt: skip
        self.step_deadline_ms: float | None = step or None  # read by the policy's prepare_step
        self._sync: Any = None
        self._aio: tuple[Any, Any] | None = None  # (event loop, aio client): a grpc.aio channel is per loop
        self.lane = SharedMemoryLane(shared_memory, self.url)  # the policy call's tensors, when the server maps them

    @property
    def loaded(self) -> Any:
        return self.local.loaded

    @property
    def version(self) -> str:
        return self.local.version

    @property
    def reload_error(self) -> str | None:
        return self.local.reload_error

    # -- clients -----------------------------------------------------------------------------
    def _sync_client(self) -> Any:
        if self._sync is None:
            import tritonclient.grpc as grpcclient

            self._sync = grpcclient.InferenceServerClient(self.url)
        return self._sync

    def _aio_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._aio is None or self._aio[0] is not loop:
            import tritonclient.grpc.aio as aioclient

            self._aio = (loop, aioclient.InferenceServerClient(self.url))
        return self._aio[1]

    def _error(self, model: str, e: Exception, deadline_ms: float) -> BackendError:
        status = e.status() if hasattr(e, "status") and callable(e.status) else None
        message = e.message() if hasattr(e, "message") and callable(e.message) else str(e)
        if status and "DEADLINE_EXCEEDED" in str(status):
            return BackendError(f"triton {model} at {self.url}: DEADLINE_EXCEEDED after {deadline_ms:g} ms")
        answered = bool(status) and not any(s in str(status) for s in UNANSWERED)
        return BackendError(f"triton {model} at {self.url}: {status or type(e).__name__}: {message}".strip(),
                            answered=answered)  # fmt: skip

    def _infer(self, model: str, inputs: list[Any], deadline_ms: float, outputs: list[Any] | None = None) -> Any:
        try:
            return self._sync_client().infer(model, inputs, outputs=outputs, client_timeout=deadline_ms / 1000.0,
                                             timeout=server_timeout_us(deadline_ms))
        except Exception as e:
            raise self._error(model, e, deadline_ms) from e

    async def _infer_async(self, model: str, inputs: list[Any], deadline_ms: float,
                           outputs: list[Any] | None = None) -> Any:  # fmt: skip
        try:
            return await self._aio_client().infer(model, inputs, outputs=outputs,
                                                  client_timeout=deadline_ms / 1000.0,
                                                  timeout=server_timeout_us(deadline_ms))
        except Exception as e:
            raise self._error(model, e, deadline_ms) from e

    def _op(self, op: Op, client: Any) -> Any:
        """The call (a coroutine, for the asyncio client) that carries out ``op`` (see ``policy_call``)."""
        a = op.args
        if op.kind == "register":
            return client.register_system_shared_memory(a["name"], a["key"], a["size"], headers=a["headers"],
                                                         client_timeout=a["deadline_ms"] / 1000.0)  # fmt: skip
        if op.kind == "unregister":
            return client.unregister_system_shared_memory(a["name"], headers=a["headers"],
                                                           client_timeout=a["deadline_ms"] / 1000.0)  # fmt: skip
        if op.kind == "status":
            return client.get_system_shared_memory_status(headers=a["headers"], as_json=True,
                                                           client_timeout=a["deadline_ms"] / 1000.0)  # fmt: skip
        if op.kind == "outputs":
            return client.get_model_metadata(a["model"], client_timeout=a["deadline_ms"] / 1000.0)
        raise ValueError(f"unknown op {op.kind}")

    def _failed(self, op: Op, e: Exception) -> BackendError:
        if isinstance(e, BackendError):
            return e
        return self._error(op.args.get("model", "shared memory"), e, op.args.get("deadline_ms", 1000.0))

    def _run(self, flow: Flow) -> dict[str, Any]:
        """Run ``flow`` with the blocking client."""
        done, op = _advance(flow, None, None)
        while not done:
            reply, error = None, None
            try:
                if op.kind == "infer":
                    reply = self._infer(op.args["model"], op.args["inputs"], op.args["deadline_ms"], op.args.get("outputs"))
                else:
                    reply = _outputs_of(op, self._op(op, self._sync_client()))
            except Exception as e:
                error = self._failed(op, e)
            except BaseException:
                flow.close()  # (KeyboardInterrupt: the flow retires what the server may still use)
                raise
            done, op = _advance(flow, reply, error)
        return op

    async def _run_async(self, flow: Flow) -> dict[str, Any]:
        """Run ``flow`` with the asyncio client."""
        done, op = _advance(flow, None, None)
        while not done:
            reply, error = None, None
            try:
                if op.kind == "infer":
                    reply = await self._infer_async(op.args["model"], op.args["inputs"], op.args["deadline_ms"],
                                                    op.args.get("outputs"))  # fmt: skip
                else:
                    reply = _outputs_of(op, await self._op(op, self._aio_client()))
            except Exception as e:
                error = self._failed(op, e)
            except BaseException:
                flow.close()  # cancelled (the step's deadline): the flow retires what the server may still use
                raise
            done, op = _advance(flow, reply, error)
        return op

    # -- the Backend protocol ------------------------------------------------------------------
    def refresh(self, force: bool = False) -> bool:
        """True when the local copy changed (:meth:`LocalCopy.refresh`)."""
        return self.local.refresh(force)

    def policy(self, inputs: PolicyInputs, deadline_ms: float | None = None) -> dict[str, Any]:
        """``deadline_ms``: this call's, when less than ``SEMSCHED_TRITON_DEADLINE_MS`` (what is left of a
        step's deadline, :mod:`inference.step_budget`)."""
        built = self.loaded  # whose feature spec built ``inputs``
        deadline = self.deadline_ms if deadline_ms is None else min(self.deadline_ms, deadline_ms)
        try:
            out = self._run(policy_flow(self.lane, inputs, deadline))
        except BackendError as e:
            self.local.call_failed(e)
            raise
        return self.local.follow(out, built)

    async def policy_async(self, inputs: PolicyInputs) -> dict[str, Any]:
        built = self.loaded
        try:
            out = await self._run_async(policy_flow(self.lane, inputs, self.deadline_ms))
        except BackendError as e:
            self.local.call_failed(e)
            raise
        return self.local.follow(out, built)

    async def encode_async(self, cleaned_texts: Sequence[str]) -> np.ndarray:
        parts = [self._embeddings(await self._infer_async("job_encoder", make_inputs({"TEXT": chunk}),
                                                          self.encode_deadline_ms), len(chunk))
                 for chunk in _text_chunks(cleaned_texts)]  # fmt: skip
        return np.concatenate(parts) if parts else np.zeros((0, self.loaded.config.spec.text_dim), np.float32)

    def encode(self, cleaned_texts: Sequence[str], deadline_ms: float | None = None) -> np.ndarray:
        """:meth:`encode_async` with the blocking client, every chunk done within ``deadline_ms``
        (each within ``SEMSCHED_TRITON_ENCODE_DEADLINE_MS`` too): a window a step opens (``inference.step_budget``)."""
        until = time.monotonic() + (deadline_ms / 1000.0 if deadline_ms is not None else math.inf)
        parts = []
        for chunk in _text_chunks(cleaned_texts):
            left = (until - time.monotonic()) * 1000.0
            if left <= 0:
                raise BackendError(f"triton job_encoder at {self.url}: out of the step's deadline "
                                   f"({deadline_ms:g} ms) before {len(chunk)} texts")  # fmt: skip
            deadline = min(self.encode_deadline_ms, left)
            parts.append(self._embeddings(self._infer("job_encoder", make_inputs({"TEXT": chunk}), deadline), len(chunk)))
        return np.concatenate(parts) if parts else np.zeros((0, self.loaded.config.spec.text_dim), np.float32)

    def _embeddings(self, result: Any, texts: int) -> np.ndarray:
        """A ``job_encoder`` answer's vectors, checked (their count, the encoder that made them)."""
        vectors = result.as_numpy("EMBEDDING")
        if vectors is None or vectors.shape[0] != texts:
            raise BackendError(f"triton job_encoder: malformed answer for {texts} texts")
        self._check_encoder(result.as_numpy("VERSION"))
        return vectors.astype(np.float32, copy=False)

    def _check_encoder(self, answered: np.ndarray | None) -> None:
        """The job encoder's stub watches ``latest`` on its own: during a switch it may answer with another
        version than the worker's. Its vectors are taken only from a version with the same encoder (found by
        review: another encoder's vectors of the same size would have been cached under this one's name)."""
        version = answered.reshape(-1)[0] if answered is not None and answered.size else b""
        version = version.decode("utf-8") if isinstance(version, bytes) else str(version)
        ours = self.loaded.config.spec.encoder
        if version != self.version and self.local.encoder_of(version) != ours:
            raise BackendError(f"triton job_encoder answered with model version {version or '?'}, whose encoder "
                               f"is not this step's ({ours}, version {self.version})")

    def close(self) -> None:
        self._close_lane()
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        if self._aio is not None:
            loop, client = self._aio
            self._aio = None
            if not loop.is_closed():
                try:
                    if loop.is_running():
                        loop.create_task(client.close())
                    else:
                        loop.run_until_complete(client.close())
                except RuntimeError:
                    pass

    def _close_lane(self) -> None:
        """Unregister the shared-memory region (a blocking call, at most 1 s: the server may be gone)."""
        self.lane.retire()
        for name in self.lane.pending:
            try:
                self._sync_client().unregister_system_shared_memory(name, headers=self.lane.headers(), client_timeout=1.0)
            except Exception as e:  # the server stopped first (it dropped the region with itself), or still uses it
                log.debug("triton: could not unregister shared memory %s: %s", name, e)
        self.lane.pending = []

    # -- the predictor model -------------------------------------------------------------------
    async def duration_async(self, text_vecs: np.ndarray, shapes: np.ndarray) -> tuple[np.ndarray, str]:
        """Predicted run times (s, NaN = no duration model) of feature rows, and what answered."""
        inputs = make_inputs({"TEXT_VEC": np.asarray(text_vecs, np.float32), "SHAPE": np.asarray(shapes, np.float32)})
        result = await self._infer_async("predictor", inputs, self.encode_deadline_ms)
        return result.as_numpy("DURATION_S")[:, 0], result.as_numpy("SOURCE").reshape(-1)[0].decode()

    async def transition_async(self, h: np.ndarray, jobs: np.ndarray, nodes: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        """``h [N, H]`` after the k actions (the served scorer's T, k steps); BackendError when absent."""
        inputs = make_inputs({"H": np.asarray(h, np.float32)[None], "ACTION_JOB": np.asarray(jobs, np.float32)[None],
                              "ACTION_NODE": np.asarray(nodes, np.int64)[None],
                              "ACTION_PAIR": np.asarray(pairs, np.float32)[None]})  # fmt: skip
        result = await self._infer_async("predictor", inputs, self.encode_deadline_ms)
        return result.as_numpy("H_NEXT")[0]
