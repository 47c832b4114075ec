"""One step's ``policy`` call on Triton: the request, the answer, and how the tensors travel.

:func:`policy_flow` is the call as a generator of :class:`Op` (sans-IO): it says what to ask
the server (register a shared-memory region, read the model's outputs, infer) and gets each
answer back, so :class:`~inference.serving.client.TritonBackend` runs the same flow with its
blocking and its asyncio gRPC client. The tensors go through the client's
:class:`~inference.serving.shared_memory.SharedMemoryLane` when it is open, else in the message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.backends.base import BackendError
from inference.model.step import PolicyInputs
from inference.serving.host_files import read_token
from inference.serving.shared_memory import SharedMemoryLane, dead_regions

log = logging.getLogger("semsched.serving")


@dataclass
class Op:
    """One thing the flow asks of the server: ``infer`` (model, inputs, outputs), ``register``
    (name, key, size), ``unregister`` (name), ``status`` (the registered regions, a dict) or
    ``outputs`` (model: its output names); the shared-memory ones carry the token's ``headers``."""

    kind: str
    args: dict[str, Any] = field(default_factory=dict)


Flow = Generator[Op, Any, dict[str, Any]]


PER_NODE = ("node_part", "h")  # the policy's outputs with a row per node, not per job


def make_inputs(arrays: dict[str, np.ndarray]) -> list[Any]:
    """tritonclient inputs carrying ``arrays`` in the message."""
    from tritonclient.grpc import InferInput
    from tritonclient.utils import np_to_triton_dtype

    out = []
    for name, value in arrays.items():
        x = InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
        x.set_data_from_numpy(value)
        out.append(x)
    return out


def policy_arrays(inputs: PolicyInputs) -> dict[str, np.ndarray]:
    """The ``policy`` model's inputs for one step (batch 1; empty dimensions encoded, see ``to_wire``):
    the compact node arrays when the inputs have a ``source`` (the server computes the pair
    features), else ``PAIRS``."""
    from inference.serving.models import to_wire

    if len(inputs.nodes) == 0:
        raise BackendError("triton policy: a step without nodes (a zero-size tensor cannot be sent)")
    return {name: value[None] for name, value in to_wire(inputs).items()}


def policy_request(inputs: PolicyInputs) -> list[Any]:
    """:func:`policy_arrays` as tritonclient inputs in the message."""
    return make_inputs(policy_arrays(inputs))


def fit_output(inputs: PolicyInputs) -> tuple[str, int] | None:
    """``(SCORES_FIT, bytes)`` of the answer's packed scores (:func:`~inference.serving.models.pack_scores`),
    known before the call for a request with ``fits``; None without (the scores come whole)."""
    from inference.serving.models import SCORES_FIT

    if inputs.fits is None:
        return None
    m = int(np.count_nonzero(inputs.fits[inputs.which])) if len(inputs.jobs) else 0
    return SCORES_FIT, 4 * max(m, 1)


def parse_answer(result: Any, model: str, in_region: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """``{output name lower-case: array of row 0, ..., "version": str, "answer_bytes": int}`` of a
    batch-1 answer (``answer_bytes``: the answer's size on the wire; ``in_region``: the outputs
    read from shared memory, row 0)."""
    response = result.get_response()
    names = [o.name for o in response.outputs]
    if "VERSION" not in names:
        raise BackendError(f"triton {model}: malformed answer, no VERSION output (outputs: {names})")
    region = in_region or {}
    out: dict[str, Any] = {name.lower(): region[name] if name in region else result.as_numpy(name)[0]
                           for name in names if name != "VERSION"}  # fmt: skip
    version = result.as_numpy("VERSION").reshape(-1)[0]
    out["version"] = version.decode() if isinstance(version, bytes) else str(version)
    out["answer_bytes"] = int(response.ByteSize())
    return out


def check_policy(out: dict[str, Any], inputs: PolicyInputs) -> dict[str, Any]:
    """The answer as ``run_policy`` returns it (dense ``scores``), checked against the request."""
    from inference.serving.models import unpack_scores

    j, n = len(inputs.jobs), len(inputs.nodes)
    if j == 0:  # the dummy row of an empty step's per-job outputs (node_part and h are per node)
        out = {k: (v[:0] if isinstance(v, np.ndarray) and k not in PER_NODE and v.ndim >= 1 else v) for k, v in out.items()}
    try:
        out = unpack_scores(out, inputs)
    except ValueError as e:
        raise BackendError(f"triton policy: malformed answer: {e}") from e
    scores, node_part = out.get("scores"), out.get("node_part")
    if scores is None or node_part is None or scores.shape != (j, n) or node_part.shape[0] != n \
            or not _cost_fits(out.get("cost"), out.get("cost_nodes"), j, n):  # fmt: skip
        shapes = {k: getattr(v, "shape", None) for k, v in out.items()}
        raise BackendError(f"triton policy: malformed answer {shapes} for {j} jobs x {n} nodes")
    return out


def _cost_fits(cost: Any, nodes: Any, j: int, n: int) -> bool:
    """ψ ``[J, K, D]`` on ``cost_nodes`` int ``[J, K]`` (nodes of the request), or neither."""
    if cost is None or nodes is None:
        return cost is None and nodes is None
    cost, nodes = np.asarray(cost), np.asarray(nodes)
    return (cost.ndim == 3 and cost.shape[0] == j and cost.shape[:2] == nodes.shape
            and (nodes.size == 0 or (int(nodes.min()) >= 0 and int(nodes.max()) < n)))  # fmt: skip


#: gRPC codes of a server that could not answer then, not one that refuses shared memory
PASSING = ("UNAVAILABLE", "CANCELLED", "RESOURCE_EXHAUSTED", "ABORTED")


def passing(e: BackendError) -> bool:
    """Was the failed registration a passing blip (the region is tried again at the next call), not a
    refusal (shared memory off for good)? Found by review: one blip turned it off for the process."""
    message = str(e)  # (a restricted protocol comes as UNAVAILABLE too: a refusal)
    return any(code in message for code in PASSING) and "restricted" not in message


def _by_wire(arrays: dict[str, np.ndarray], deadline_ms: float) -> Op:
    return Op("infer", {"model": "policy", "inputs": make_inputs(arrays), "deadline_ms": deadline_ms})


def _sizes(arrays: dict[str, np.ndarray], shared: int = 0) -> dict[str, int]:
    """``request_bytes``: the request's tensors in the message; ``shared_bytes``: through the region."""
    return {"request_bytes": sum(value.nbytes for value in arrays.values()), "shared_bytes": shared}


def _unregister_retired(lane: SharedMemoryLane, tidy_left: Callable[[], float]) -> Generator[Op, Any, None]:
    """Unregister the regions earlier calls retired, within the housekeeping's time (``tidy_left``, ms)."""
    for name in list(lane.pending):
        if not tidy_left():
            break  # the next call goes on
        try:
            yield Op("unregister", {"name": name, "headers": lane.headers(), "deadline_ms": min(tidy_left(), 1000.0)})
        except BackendError:
            break  # still in use, or the server is gone: the next call tries again
        lane.pending.remove(name)


def policy_flow(lane: SharedMemoryLane, inputs: PolicyInputs, deadline_ms: float) -> Flow:
    """One step's policy call (module docstring): the checked answer, with ``request_bytes`` and
    ``answer_bytes`` (the tensors in the gRPC messages) and ``shared_bytes`` (both ways through the
    region; 0 by the wire). ``deadline_ms`` bounds all its ops together. Raises
    :class:`BackendError` as the call's ops do."""
    end = time.monotonic() + deadline_ms / 1000.0
    # unregistering retired regions (and the first call's sweep of dead workers' ones) is housekeeping: at
    # most a quarter of the deadline, the rest waits for the next call (found by review: a server slow to
    # let go of them took the whole deadline before the infer, and the step fell back)
    tidy_end = time.monotonic() + deadline_ms / 4000.0

    def left() -> float:  # ms
        return max(0.001, (end - time.monotonic()) * 1000.0)

    def tidy_left() -> float:  # ms (0: no time for housekeeping in this call)
        return max(0.0, (tidy_end - time.monotonic()) * 1000.0)

    arrays = policy_arrays(inputs)
    if lane.busy:
        result = yield _by_wire(arrays, deadline_ms)
        return check_policy(parse_answer(result, "policy") | _sizes(arrays), inputs)
    if lane.off is not None:  # by the wire from now on; a region retired before is still let go (found by
        if lane.pending:  # review: one retired as the lane went off stayed registered, in a /dev/shm already full)
            lane.busy = True
            try:
                yield from _unregister_retired(lane, tidy_left)
            finally:
                lane.busy = False
        result = yield _by_wire(arrays, left())
        return check_policy(parse_answer(result, "policy") | _sizes(arrays), inputs)
    output = fit_output(inputs)
    placed, message, size = lane.plan(arrays, output)
    lane.busy = True
    try:
        yield from _unregister_retired(lane, tidy_left)
        if lane.needs_region(size):
            lane.token = read_token(lane.url)
            if lane.token is None:  # not (yet) a server of this user on this host: by the wire
                lane.retire()  # (one a server may still hold, if any: unregistered once a token is back)
                result = yield _by_wire(arrays, left())
                return check_policy(parse_answer(result, "policy") | _sizes(arrays), inputs)
            if not lane.swept and tidy_left():
                try:
                    status = yield Op("status", {"headers": lane.headers(), "deadline_ms": tidy_left()})
                    for name in dead_regions(status.get("regions", {})):
                        if not tidy_left():
                            break  # the rest at this worker's next registration
                        yield Op("unregister", {"name": name, "headers": lane.headers(), "deadline_ms": tidy_left()})
                    else:
                        lane.swept = True
                except BackendError as e:  # out of time, or a blip: again at the next registration; refused: not
                    lane.swept = not ("DEADLINE_EXCEEDED" in str(e) or passing(e))  # asked again (found by review)
            try:
                region = lane.new_region(size)
            except OSError as e:  # /dev/shm full, out of file descriptors, not permitted: the wire, from now on
                log.warning("triton policy: tensors go in the gRPC message, not shared memory "
                            "(cannot create a region: %s)", e)  # fmt: skip
                lane.refused(f"cannot create a shared-memory region: {e}")
                result = yield _by_wire(arrays, left())
                return check_policy(parse_answer(result, "policy") | _sizes(arrays), inputs)
            mapped = False  # the server registered it
            try:
                yield Op("register", {"name": region.name, "key": region.key, "size": region.size,
                                      "headers": lane.headers(), "deadline_ms": left()})  # fmt: skip
                mapped = True
                lane.outputs = (yield Op("outputs", {"model": "policy", "deadline_ms": left()}))
            except GeneratorExit:  # the call was cancelled: the server may have registered it
                lane.retire()
                raise
            except BackendError as e:
                timed_out = "DEADLINE_EXCEEDED" in str(e)
                if mapped or timed_out:  # the server holds it, or may
                    lane.retire()
                else:
                    lane.drop_region()
                result = yield _by_wire(arrays, left())  # raises too when the server is down
                if not timed_out and not passing(e):
                    log.warning("triton policy: tensors go in the gRPC message, not shared memory (%s)", e)
                    lane.refused(str(e))
                return check_policy(parse_answer(result, "policy") | _sizes(arrays), inputs)
            lane.registered()
        call = lane.call(placed, output, size)
        try:
            result = yield Op("infer", {"model": "policy", "inputs": call.infer_inputs() + make_inputs(message),
                                        "outputs": call.requested_outputs(lane.outputs), "deadline_ms": left()})
            read = {call.output[0]: call.read_output(result, np.float32)} if call.output else {}
        except GeneratorExit:  # the call was cancelled (the step's deadline): the server may still use it
            lane.retire()
            raise
        except (BackendError, ValueError) as e:
            lane.retire()  # the server may still read or write it (a missed deadline)
            if isinstance(e, ValueError):
                raise BackendError(f"triton policy: malformed answer: {e}") from e
            if "DEADLINE_EXCEEDED" in str(e) or "shared memory" not in str(e).lower():
                raise
            result = yield _by_wire(arrays, left())  # e.g. a restarted server forgot the region
            return check_policy(parse_answer(result, "policy") | _sizes(arrays), inputs)
    finally:
        lane.busy = False
    shared = sum(value.nbytes for _, value in placed.values()) + sum(value.nbytes for value in read.values())
    return check_policy(parse_answer(result, "policy", read) | _sizes(message, shared), inputs)
