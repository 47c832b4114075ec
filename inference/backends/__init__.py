"""Where the learned policy's model runs: in this process, or on a Triton server.

Both backends answer the same per-step call (:func:`inference.model.step.run_policy` on a
:class:`~inference.model.step.PolicyInputs`), so the policy never knows which one it talks
to. ``get_backend("in-process" | "triton", model_dir)``; the worker reads
``SEMSCHED_INFERENCE`` (default ``in-process``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from inference.backends.base import Backend, BackendError
from inference.backends.inprocess import InProcessBackend, torch_threads

INFERENCE_ENV = "SEMSCHED_INFERENCE"
BACKENDS = ("in-process", "triton")


def default_backend_name() -> str:
    return os.environ.get(INFERENCE_ENV) or "in-process"


def get_backend(name: str | None, model_dir: Path, **kwargs: Any) -> Backend:
    """A backend by name; raises on a model that cannot be loaded (the policy then falls back)."""
    name = name or default_backend_name()
    if name == "in-process":
        return InProcessBackend(model_dir, **kwargs)
    if name == "triton":
        from inference.serving.client import TritonBackend

        return TritonBackend(model_dir, **kwargs)
    raise ValueError(f"unknown inference backend {name!r}; available: {', '.join(BACKENDS)}")


def check_environment() -> None:
    """The learned policy's settings read the way its backend will (``SEMSCHED_INFERENCE``, torch's
    threads, the Triton deadlines); ``ValueError`` names a bad one. The policy turns any failure to
    build its backend into fallback decisions, so the worker checks these at start instead."""
    name = default_backend_name()
    if name not in BACKENDS:
        raise ValueError(f"{INFERENCE_ENV} must be one of {', '.join(BACKENDS)}, not {name!r}")
    torch_threads()
    if name == "triton":
        from inference.serving.client import check_environment as check_triton

        check_triton()


__all__ = ["BACKENDS", "INFERENCE_ENV", "Backend", "BackendError", "InProcessBackend", "check_environment",
           "default_backend_name", "get_backend"]  # fmt: skip
