"""``EncoderCache``: each distinct (cleaned) text is encoded once per process.

Jobs of one application or one user repeat their text; fill clones repeat it exactly. The
cache wraps any :class:`~inference.encoders.base.TextEncoder`, strips outcome labels
(:func:`inference.encoders.text.clean_text`) and encodes only the texts it has not seen, in
one batch. Bounded: when it holds ``max_entries`` texts it starts over, keeping the texts of the call (simple, and the
working set of a scheduling loop is far smaller).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from inference.encoders.base import TextEncoder
from inference.encoders.text import clean_text


class EncoderCache:
    def __init__(self, encoder: TextEncoder, max_entries: int = 100_000) -> None:
        self.encoder = encoder
        self.max_entries = max_entries
        self._vectors: dict[str, np.ndarray] = {}
        self._cleaned: dict[str, str] = {}  # raw text → cleaned: a step re-cleans the same pending texts
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def serve_remotely(self) -> bool:
        return self.encoder.serve_remotely

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct cleaned texts of ``texts`` not cached yet (to encode elsewhere, e.g. on Triton)."""
        return [t for t in dict.fromkeys(self._clean(t) for t in texts) if t not in self._vectors]

    def _clean(self, text: str) -> str:
        cleaned = self._cleaned.get(text)
        if cleaned is None:
            if len(self._cleaned) >= self.max_entries:
                self._cleaned.clear()
            cleaned = self._cleaned[text] = clean_text(text)
        return cleaned

    def put(self, cleaned: Sequence[str], vectors: np.ndarray) -> None:
        """Cache vectors computed elsewhere for CLEANED texts (as :meth:`missing` returns them)."""
        if len(cleaned) != len(vectors) or (len(vectors) and vectors.shape[1] != self.dim):
            raise ValueError(f"put: {len(cleaned)} texts, vectors {vectors.shape}, dim {self.dim}")
        self._make_room(len(cleaned), keep=cleaned)
        for text, vec in zip(cleaned, np.asarray(vectors, dtype=np.float32), strict=True):
            self._vectors[text] = vec

    def reserve(self, texts: Sequence[str]) -> None:
        """Room for every text of ``texts`` not cached yet, keeping those that are: before their vectors
        come from elsewhere in parts (:meth:`put` per chunk, ``inference.step_call.embed_texts``), so no
        part pushes out another or the call's cached texts (found by review: on Triton a full cache kept
        each chunk alone, and the worker embedded the rest itself, MiniLM loaded on its event loop)."""
        cleaned = [self._clean(t) for t in texts]
        self._make_room(sum(1 for t in dict.fromkeys(cleaned) if t not in self._vectors), keep=cleaned)

    def _make_room(self, coming: int, keep: Sequence[str]) -> None:
        """Start over when ``coming`` more vectors would pass ``max_entries``, keeping those of ``keep`` (the
        call's texts: found by review, a full cache dropped a text the call had just found cached, and
        its lookup raised KeyError: a fallen-back step, a failed duration ordering, an archive retraining
        ended; on Triton, the chunk the server had just embedded)."""
        if len(self._vectors) + coming > self.max_entries:
            self._vectors = {t: self._vectors[t] for t in dict.fromkeys(keep) if t in self._vectors}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``[len(texts), dim]``, the encoder's vectors of the cleaned texts."""
        cleaned = [self._clean(t) for t in texts]
        new = [t for t in dict.fromkeys(cleaned) if t not in self._vectors]
        self.misses += len(new)
        self.hits += len(cleaned) - len(new)
        if new:
            self._make_room(len(new), keep=cleaned)
            for text, vec in zip(new, self.encoder.encode(new), strict=True):
                self._vectors[text] = vec
        if not cleaned:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in cleaned]).astype(np.float32, copy=False)
