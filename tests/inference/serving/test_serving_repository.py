"""The model repository `semsched serve` hands tritonserver: three Python-backend models whose
configurations declare every tensor the callables read and write (the session's real server
loads it: tests/inference/serving/conftest.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from serving_helpers import publish

from inference.model import load_model
from inference.serving.models import POLICY_INPUTS, policy_output_ranks
from inference.serving.repository import MODEL_NAMES, TensorSpec, write_repository


def declared(config: str, section: str) -> dict[str, str]:
    """``{tensor name: its line}`` of a configuration's ``input`` or ``output`` list."""
    body = config.split(f"{section} [", 1)[1].split("\n]", 1)[0]
    return {re.search(r'name: "(\w+)"', line).group(1): line for line in body.strip().splitlines()}  # type: ignore[union-attr]


def test_three_models_each_a_python_backend_model_with_its_parameters(tmp_path):
    latest = publish(tmp_path / "models", "v1", seed=0)
    root = write_repository(tmp_path / "repo", load_model(latest), {"model_dir": str(latest), "device": "cpu"})
    assert sorted(p.name for p in root.iterdir()) == sorted(MODEL_NAMES)
    for name in MODEL_NAMES:
        config = (root / name / "config.pbtxt").read_text()
        assert f'name: "{name}"' in config and 'backend: "python"' in config
        assert "max_queue_delay_microseconds: 200" in config
        assert f'key: "kind", value: {{ string_value: "{name}" }}' in config
        assert f'string_value: "{latest}"' in config
        assert "TritonPythonModel" in (root / name / "1" / "model.py").read_text()
    policy = (root / "policy" / "config.pbtxt").read_text()
    inputs = declared(policy, "input")
    assert set(inputs) == set(POLICY_INPUTS)
    for name, (_, rank, optional) in POLICY_INPUTS.items():
        assert ("optional: true" in inputs[name]) == optional and inputs[name].count("-1") == rank
    assert "TYPE_STRING" in inputs["MODEL_NAMES"] and "TYPE_BOOL" in inputs["FITS"]
    outputs = declared(policy, "output")
    assert set(outputs) == set(policy_output_ranks(load_model(latest))) | {"VERSION"}
    with pytest.raises(FileExistsError):  # never over an existing repository
        write_repository(tmp_path / "repo", load_model(latest), {})


def test_a_tensor_without_a_triton_type_is_refused():
    assert TensorSpec("X", np.float32, (-1, 4), optional=True).pbtxt() == \
        '  { name: "X", data_type: TYPE_FP32, dims: [ -1, 4 ], optional: true }'
    with pytest.raises(ValueError, match="no Triton type for complex64"):
        TensorSpec("Z", np.complex64, (-1,)).pbtxt()
