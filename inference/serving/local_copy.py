"""The Triton client's local copy of the model version the server answers with.

The ``learned`` policy needs the serving version's feature spec (to build a step's inputs) and
its head (to re-score, within a step, the nodes earlier placements changed), so a
:class:`~inference.serving.client.TritonBackend` keeps a local copy, loaded from ``model_dir`` —
the directory the server serves (``models/latest``) — and kept in step with two sources:

- the server's answers (:meth:`LocalCopy.follow`): an answer naming another version loads that
  version (``model_dir`` re-resolved, else its sibling ``<models>/<version>``) before the answer
  is used, so the answer and the copy always agree; a version that cannot be found locally
  raises ``BackendError``. An answer from another version than the one whose feature spec
  built the request is refused (``BackendError``: the fallback decides that step, and the next
  step's inputs are the answering version's) unless the two specs are equal — its scores would
  mix two models' inputs;
- ``model_dir`` itself (:meth:`LocalCopy.refresh`, every ``watch_s``): repointed, the copy loads
  the new target, so the inputs follow a new feature spec even when the server can no longer
  answer the old one. While the server answers with another version than the pointer names (it
  has not picked the new one up yet, or refuses it until restarted), the copy follows the
  server and leaves that target alone — loading it would flip the copy back and forth at every
  check — until the pointer moves again or a call fails (the server may then serve what the
  pointer names and refuse the inputs of the version kept; not a missed deadline, which says
  nothing of the server's version).

A version the server answers with that cannot be loaded here is looked for again once ``watch_s``
has passed, not at every step (each look loaded ``model_dir``'s model on the event loop).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from inference.backends.base import BackendError

log = logging.getLogger("semsched.serving")


def inputs_of(config: Any) -> tuple[Any, int]:
    """What a step's inputs are built from, of a model's config: the feature spec, and the k of the node
    graph's nearest neighbours (the topology sent with the inputs; found by review: only the spec was
    compared, and an answer of a model of another k was taken for one on its own inputs)."""
    return config.spec, config.knn


class LocalCopy:
    def __init__(self, model_dir: Path | None, loaded: Any = None, watch_s: float = 2.0) -> None:
        from inference.model.io import load_model

        if loaded is None and model_dir is None:
            raise ValueError("TritonBackend needs a model_dir or a loaded model (the local copy)")
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.loaded = loaded if loaded is not None else load_model(Path(model_dir))  # type: ignore[arg-type]
        self.watch_s = watch_s
        self.reload_error: str | None = None
        self._checked = time.monotonic()
        self._swapped = False
        self._kept_from: Path | None = None  # a model_dir target the server does not serve (module docstring)
        self._refused: set[tuple[Path, int]] = set()  # versions not to load again (inference.model.io.reload_if_moved)
        self._encoders: dict[str, str | None] = {}  # version -> its text encoder (encoder_of)
        self._missing: dict[str, tuple[float, str]] = {}  # version -> (when, why) it could not be loaded

    @property
    def version(self) -> str:
        return str(self.loaded.version)

    def refresh(self, force: bool = False) -> bool:
        """True when the copy changed since the last call: it followed the server to a new version,
        or ``model_dir`` was repointed (checked every ``watch_s``, or now with ``force``)."""
        swapped, self._swapped = self._swapped, False
        if self.model_dir is None or (not force and time.monotonic() - self._checked < self.watch_s):
            return swapped
        self._checked = time.monotonic()
        if self._kept_from is not None:
            if self._pointer() == self._kept_from:
                return swapped
            self._kept_from = None  # the pointer moved since
        from inference.model.io import reload_if_moved

        try:
            fresh = reload_if_moved(self.model_dir, self.loaded, refused=self._refused)
        except Exception as e:  # keep the current copy; the server decides what answers
            self.reload_error = f"{self.model_dir}: {type(e).__name__}: {e}"
            return swapped
        if fresh is not None:
            log.info("local model copy %s -> %s (%s moved)", self.version, fresh.version, self.model_dir)
            self.loaded, self.reload_error, swapped = fresh, None, True
        return swapped

    def follow(self, out: dict[str, Any], built: Any) -> dict[str, Any]:
        """``out`` (an answer naming its ``version``), once the copy is that version; ``built``: the
        loaded model whose feature spec built the request (module docstring)."""
        version = out["version"]
        if version != self.version:
            self._load_version(version)
        if version != built.version:
            target, here = self._pointer(), self.loaded.path and Path(self.loaded.path).resolve()
            self._kept_from = target if target is not None and target != here else None
            if inputs_of(self.loaded.config) != inputs_of(built.config):
                raise BackendError(f"triton answered with model version {version} to inputs built for {built.version}, "
                                   f"whose feature spec or topology (k nearest nodes) differs: the fallback decides "
                                   f"this step, the next one's inputs are {version}'s")  # fmt: skip
        return out

    def call_failed(self, error: BackendError) -> None:
        """A call to the server failed. One the server refused (``error.answered``: it may now serve what the
        pointer names, and refuse the inputs of the version kept) lets ``refresh`` follow ``model_dir``
        again; a missed deadline or a server out of reach says nothing of its version (found by review: each
        one flipped the copy to the pointer's version, the next answer flipped it back, and the step between
        fell back, three model loads on the event loop)."""
        if error.answered:
            self._kept_from = None

    def _pointer(self) -> Path | None:
        """The directory ``model_dir`` names now (``None`` without one, or when it does not resolve)."""
        try:
            return None if self.model_dir is None else self.model_dir.resolve(strict=True)
        except OSError:
            return None

    def encoder_of(self, version: str) -> str | None:
        """The text encoder model version ``version`` names (None: this worker cannot read that version)."""
        if version == self.version:
            return str(self.loaded.config.spec.encoder)
        if version not in self._encoders:
            import json

            from inference.model.io import ModelConfig

            try:
                root = self.model_dir.resolve().parent if self.model_dir is not None else None
                meta = json.loads((root / version / "config.json").read_text()) if root is not None else None
                self._encoders[version] = str(ModelConfig.from_json(meta["model"]).spec.encoder) if meta else None
            except Exception:  # noqa: BLE001 - unreadable: the caller refuses the answer
                self._encoders[version] = None
        return self._encoders[version]

    def _load_version(self, version: str) -> None:
        from inference.model.io import load_model

        missed = self._missing.get(version)
        if missed is not None and time.monotonic() - missed[0] < self.watch_s:
            raise BackendError(missed[1])  # looked for it just now: not every step (a model load each, review)
        candidates: list[Path] = []
        if self.model_dir is not None:
            candidates.append(self.model_dir)
            candidates.append(self.model_dir.resolve().parent / version)
        for directory in candidates:
            try:
                fresh = load_model(directory)
            except Exception as e:
                self.reload_error = f"{directory}: {type(e).__name__}: {e}"
                continue
            if fresh.version == version:
                log.info("local model copy %s -> %s (%s)", self.version, version, fresh.path)
                self.loaded, self._swapped, self.reload_error = fresh, True, None
                self._missing.clear()
                return
        reason = (f"triton answered with model version {version}, which this worker cannot load locally "
                  f"(local copy {self.version}; looked in {', '.join(map(str, candidates)) or 'nothing'})")  # fmt: skip
        self._missing[version] = (time.monotonic(), reason)
        raise BackendError(reason)
