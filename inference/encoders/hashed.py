"""``HashedNgramEncoder``: the cheap, dependency-free text encoder (the fallback and the tests').

Features: lower-cased word unigrams and bigrams (words split on anything that is not a
letter or digit) and character 3-grams of the whole text padded with spaces; each hashed
with BLAKE2b (stable across processes and machines — Python's ``hash`` is salted per
process) into ``dim`` buckets with a sign bit from the same digest (the "hashing trick",
which keeps collisions unbiased), counts summed, then the row is L2-normalised.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

import numpy as np

from inference.encoders.base import l2_normalise

_WORD = re.compile(r"[a-z0-9]+")


def stable_bucket(token: str, dim: int) -> tuple[int, float]:
    """``(bucket, sign)`` of ``token``: BLAKE2b's first 8 bytes, bucket = value mod dim, sign from bit 63."""
    v = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
    return v % dim, (1.0 if v >> 63 else -1.0)


def ngrams(text: str) -> Iterable[str]:
    """The tokens of ``text``: ``w:`` unigrams, ``b:`` bigrams, ``c:`` character 3-grams."""
    low = text.lower()
    words = _WORD.findall(low)
    yield from (f"w:{w}" for w in words)
    yield from (f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False))
    padded = f" {' '.join(low.split())} "
    if len(padded) > 2:
        yield from (f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2))


class HashedNgramEncoder:
    """Signed feature hashing of word 1–2-grams and character 3-grams (see the module docstring)."""

    #: computed in the worker even when the policy runs on Triton: 0.12 ms for one new text and
    #: 0.6 ms for 16, against a ``job_encoder`` round trip of 3.1 and 3.8 ms (2 shared cores)
    serve_remotely = False

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError("dim must be >= 2")
        self.dim = dim
        self.name = f"hashed-ngram-{dim}"
        self._tokens: dict[str, tuple[int, float]] = {}  # token -> (bucket, sign): hashing is the cost

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._tokens.get(token)
        if hit is None:
            hit = self._tokens[token] = stable_bucket(token, self.dim)
        return hit

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[int] = []
        hits: list[tuple[int, float]] = []
        for row, text in enumerate(texts):  # Python lists, one numpy scatter: per-item numpy writes cost µs each
            before = len(hits)
            hits.extend(self._bucket(token) for token in ngrams(text))
            rows.extend([row] * (len(hits) - before))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if hits:
            buckets, signs = zip(*hits, strict=True)
            np.add.at(out, (np.array(rows), np.array(buckets)), np.array(signs, dtype=np.float32))
        return l2_normalise(out)
