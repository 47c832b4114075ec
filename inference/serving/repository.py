"""The Triton model repository ``semsched serve`` writes: ``policy``, ``job_encoder`` and ``predictor``.

Each model is a directory with a ``config.pbtxt`` (its tensors, dynamic batching with a 200 µs
queue delay, one CPU instance, and the parameters its Python-backend model reads) and a version
``1/model.py`` that is one import: :class:`inference.serving.python_model.TritonPythonModel`,
which runs the model's callable (:mod:`inference.serving.models`,
:mod:`inference.serving.predictor`) inside Triton's Python-backend stub — one process per model,
no extra hop to another process (PyTriton's proxy used to add one, ~2–4 ms a call).

The tensors are declared here, once, as :class:`TensorSpec`: batch dimension implied
(``max_batch_size``), ``-1`` for a variable one, optional inputs marked so (a request may carry
only some of them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAMES = ("policy", "job_encoder", "predictor")
QUEUE_DELAY_US = 200
MAX_BATCH = {"policy": 4, "job_encoder": 256, "predictor": 256}

_TYPES = {np.dtype(np.float32): "TYPE_FP32", np.dtype(np.int64): "TYPE_INT64", np.dtype(np.int32): "TYPE_INT32",
          np.dtype(np.bool_): "TYPE_BOOL", np.dtype(np.bytes_): "TYPE_STRING", np.dtype(np.object_): "TYPE_STRING"}  # fmt: skip


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: Any  # a numpy dtype (bytes / object: Triton BYTES)
    shape: tuple[int, ...]  # without the batch dimension; -1 = variable
    optional: bool = False

    def pbtxt(self) -> str:
        kind = _TYPES.get(np.dtype(self.dtype))
        if kind is None:
            raise ValueError(f"{self.name}: no Triton type for {np.dtype(self.dtype)}")
        dims = ", ".join(str(d) for d in self.shape)
        return (f'  {{ name: "{self.name}", data_type: {kind}, dims: [ {dims} ]'
                f'{", optional: true" if self.optional else ""} }}')  # fmt: skip


def config_pbtxt(name: str, inputs: list[TensorSpec], outputs: list[TensorSpec], parameters: dict[str, str]) -> str:
    """A Python-backend model's configuration (text protobuf)."""
    params = "\n".join(f'parameters {{ key: {json.dumps(k)}, value: {{ string_value: {json.dumps(v)} }} }}'
                       for k, v in parameters.items())  # fmt: skip
    return "\n".join([
        f'name: "{name}"', 'backend: "python"', f"max_batch_size: {MAX_BATCH[name]}",
        # a request whose caller has given up (its deadline, sent as the request's timeout) leaves the
        # queue instead of running: found by review, the steps after an overload queued behind
        # the work the worker had already decided by the fallback
        f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} default_queue_policy {{ "
        "timeout_action: REJECT default_timeout_microseconds: 0 allow_timeout_override: true } }",
        "input [", ",\n".join(t.pbtxt() for t in inputs), "]",
        "output [", ",\n".join(t.pbtxt() for t in outputs), "]",
        "instance_group [ { kind: KIND_CPU, count: 1 } ]", params, "",
    ])  # fmt: skip


def policy_tensors(loaded: Any) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The ``policy`` model's inputs and outputs; the outputs are what ``run_policy`` returns for
    ``loaded`` (a version with other heads needs a restart, see ``PolicyModel``)."""
    from inference.serving.models import POLICY_INPUTS, policy_output_ranks

    inputs = [TensorSpec(n, dt, (-1,) * rank, opt) for n, (dt, rank, opt) in POLICY_INPUTS.items()]
    outputs = [TensorSpec(n, dt, (-1,) * rank) for n, (dt, rank) in policy_output_ranks(loaded).items()]
    return inputs, [*outputs, TensorSpec("VERSION", np.bytes_, (1,))]


def encoder_tensors() -> tuple[list[TensorSpec], list[TensorSpec]]:
    return ([TensorSpec("TEXT", np.bytes_, (1,))],
            [TensorSpec("EMBEDDING", np.float32, (-1,)), TensorSpec("VERSION", np.bytes_, (1,))])  # fmt: skip


def write_repository(root: Path, loaded: Any, parameters: dict[str, str]) -> Path:
    """The three models under ``root`` (created; must not hold a repository yet); ``parameters``
    reach every model (``model_dir``, ``device``, ...: :mod:`inference.serving.python_model`)."""
    from inference.serving.predictor import PredictorModel

    tensors = {"policy": policy_tensors(loaded), "job_encoder": encoder_tensors(),
               "predictor": (PredictorModel.inputs(), PredictorModel.outputs())}  # fmt: skip
    for name in MODEL_NAMES:
        version = root / name / "1"
        version.mkdir(parents=True)
        inputs, outputs = tensors[name]
        (root / name / "config.pbtxt").write_text(config_pbtxt(name, inputs, outputs, {"kind": name, **parameters}))
        (version / "model.py").write_text("from inference.serving.python_model import TritonPythonModel  # noqa: F401\n")
    return root
