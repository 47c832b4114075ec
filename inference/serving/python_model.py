"""The Python-backend model Triton runs for each of semsched's three models (in its stub process).

Every model's ``1/model.py`` (written by :mod:`inference.serving.repository`) imports
:class:`TritonPythonModel`; the model's ``config.pbtxt`` parameters say which callable it runs
(``kind``: ``policy``, ``job_encoder`` or ``predictor``), on which model directory and device.
Each stub loads its own :class:`~inference.serving.host.ModelHost`, which swaps in a new version
when ``model_dir`` (``models/latest``) moves, and logs one ``model <kind> ...`` line saying what
it serves and where.

``execute`` hands the callable the batch's requests as ``{input name: array}`` (the optional
inputs a request lacks are absent), as :mod:`inference.serving.models` expects, and turns its
answers into responses; a request whose caller has already given up is answered with an error
without running (the policy's requests, a whole step each, are run one at a time, each checked just
before it runs). A batch that raises is run again request by request, so an exception
fails only the request that caused it, with its message (the client raises
:class:`~inference.backends.base.BackendError` naming it).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("semsched.serving")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CANCELLED = TimeoutError("cancelled by the caller before it ran")  # (its message; each response gets its own error)


def make_model(kind: str, host: Any, device: str, duration_dir: Path | None = None,
               outputs: list[str] | None = None) -> Any:  # fmt: skip
    """The callable of model ``kind`` over ``host`` (the served version), torch parts on ``device``;
    ``outputs``: the output names Triton's configuration of it holds."""
    from inference.serving.models import JobEncoderModel, PolicyModel
    from inference.serving.predictor import PredictorModel

    if kind == "policy":
        return PolicyModel(host, outputs)
    if kind == "job_encoder":
        return JobEncoderModel(host, device)
    if kind == "predictor":
        return PredictorModel(host, duration_dir)
    raise ValueError(f"unknown model kind {kind!r}")


def describe(kind: str, model: Any) -> str:
    """What model ``kind`` serves and where (the log's ``model <kind> ...`` line)."""
    host = model.host
    if kind == "policy":
        return f"{host.version} (outputs {', '.join(model.outputs)}, torch on {host.device})"
    if kind == "job_encoder":
        return f"{host.version} (encoder {model.encoder_name} on {model.device})"
    return str(model.describe())


class TritonPythonModel:
    """Triton's Python-backend interface: ``initialize``, ``execute``, ``finalize``."""

    def initialize(self, args: dict[str, Any]) -> None:
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
        import torch

        from inference.serving.host import ModelHost, pick_device

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.kind = params["kind"]
        self.inputs = [t["name"] for t in config["input"]]
        torch.set_num_threads(max(1, int(params.get("threads") or 1)))
        device = pick_device(params.get("device") or "cpu")
        agreement = None
        if params.get("agreement_dir"):  # (the server's models swap versions together: version_agreement.py)
            from inference.serving.repository import MODEL_NAMES
            from inference.serving.version_agreement import VersionAgreement

            agreement = VersionAgreement(Path(params["agreement_dir"]), self.kind, MODEL_NAMES)
        host = ModelHost(Path(params["model_dir"]), watch_s=float(params.get("watch_s") or 1.0), device=device,
                         agreement=agreement)  # fmt: skip
        duration = params.get("duration_dir") or None
        self.model = make_model(self.kind, host, device, Path(duration) if duration else None,
                                [t["name"] for t in config.get("output", [])])  # fmt: skip
        log.info("model %-11s %s", self.kind, describe(self.kind, self.model))
        host.watch()  # new versions loaded in a thread beside the serving one, not on a request's path
        if (duration := getattr(self.model, "duration", None)) is not None:
            duration.watch()

    def execute(self, requests: list[Any]) -> list[Any]:
        import triton_python_backend_utils as pb_utils

        if getattr(self.model, "one_at_a_time", False):  # (the policy: each request is a whole step)
            return [self._one(pb_utils, request) for request in requests]  # each checked just before it runs
        out: list[Any] = [None] * len(requests)
        batch, where = [], []
        for i, request in enumerate(requests):
            if cancelled(request):
                out[i] = refused(pb_utils, CANCELLED)
                continue
            batch.append(self._arrays(pb_utils, request))
            where.append(i)
        for i, response in zip(where, self._answers(pb_utils, batch), strict=True):
            out[i] = response
        return out

    def _arrays(self, pb_utils: Any, request: Any) -> dict[str, np.ndarray]:
        arrays = {}
        for name in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                arrays[name] = tensor.as_numpy()
        return arrays

    def _one(self, pb_utils: Any, request: Any) -> Any:
        if cancelled(request):
            return refused(pb_utils, CANCELLED)
        try:
            return answered(pb_utils, self.model([self._arrays(pb_utils, request)])[0])
        except Exception as e:
            return refused(pb_utils, e)

    def _answers(self, pb_utils: Any, batch: list[dict[str, np.ndarray]]) -> list[Any]:
        if not batch:
            return []
        try:
            return [answered(pb_utils, answer) for answer in self.model(batch)]
        except Exception as e:  # the model's refusal (a malformed request, an absent head)
            if len(batch) == 1:
                return [refused(pb_utils, e)]
        # a batch that failed: each request alone, so that one request's error is its own and the
        # others are answered (and each error response gets its own TritonError: one shared by
        # several responses came back garbled, then crashed tritonserver with SIGSEGV)
        out = []
        for arrays in batch:
            try:
                out.append(answered(pb_utils, self.model([arrays])[0]))
            except Exception as e:
                out.append(refused(pb_utils, e))
        return out

    def finalize(self) -> None:
        """Stop the watch threads (a second each at most: one may be loading a version) before the stub's
        interpreter ends (a daemon thread ended inside torch's C++ could abort it; review)."""
        self.model.host.stop_watching()
        if (duration := getattr(self.model, "duration", None)) is not None:
            duration.stop_watching()
        log.info("model %s stopped", self.kind)


def cancelled(request: Any) -> bool:
    """Has the request's caller given up on it (its gRPC deadline passed: the client cancels)? Found by
    review: the requests of steps already decided by the fallback ran after all, and the next steps
    waited behind them. (Those still queued are dropped by the queue policy, ``repository.config_pbtxt``;
    these are the ones the dynamic batcher had already handed over.)"""
    check = getattr(request, "is_cancelled", None)
    try:
        return bool(check()) if check is not None else False
    except Exception:  # noqa: BLE001 - a backend that cannot tell: run it
        return False


def answered(pb_utils: Any, answer: dict[str, Any]) -> Any:
    """One request's response: its answer's arrays as output tensors."""
    return pb_utils.InferenceResponse([pb_utils.Tensor(name, np.ascontiguousarray(value))
                                       for name, value in answer.items()])  # fmt: skip


def refused(pb_utils: Any, error: Exception) -> Any:
    """One request's error response, with a TritonError of its own."""
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(f"{type(error).__name__}: {error}"))
