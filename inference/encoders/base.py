"""The text-encoder contract: ``dim`` and ``encode(texts) -> float32 [n, dim]``, rows L2-normalised.

Every encoder (the hashed n-gram one here, all-MiniLM-L6-v2 later: see :mod:`inference.encoders.minilm`)
implements this protocol, so featurisation, the cache and the model never know which one runs.
An empty text encodes to the zero vector (the only row that is not unit length).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TextEncoder(Protocol):
    #: a stable identifier written into a model's config (a model trained on one encoder's
    #: vectors must be served with the same encoder)
    name: str
    dim: int
    #: whether a remote backend (Triton's ``job_encoder``) computes the vectors when the policy runs
    #: there: a neural encoder (MiniLM) is worth the round trip and the server's GPU; the hashed
    #: one costs less than the round trip itself and is computed where the features are built
    serve_remotely: bool

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), float32."""
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x, dtype=np.float32), where=norm > 0).astype(np.float32)
