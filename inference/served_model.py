"""Which model the ``learned`` policy serves (:class:`ServedModel`, a part of
:class:`inference.policy.LearnedPolicy`): its backend, opened from ``model_dir`` (or a loaded model),
and, when none loads, the fallback state and a look again every :data:`RETRY_S` — a worker started
before the first ``semsched train`` picks the model up once it is published."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from inference.prepared_step import StepStatus

RETRY_S = 10.0  # without a model: how often to look for one again


class ServedModel:
    """The backend and what it serves; ``fell_back`` / ``fallback_reason`` when there is none."""

    model_dir: Path
    last_step: StepStatus

    def _open(self, backend: str | None, backend_kwargs: dict[str, Any] | None, loaded: Any) -> None:
        """The backend: in-process on ``loaded`` when given, else ``backend`` on ``model_dir``; any failure
        (missing, corrupt or mismatched) means "use the heuristic", and is looked at again later."""
        from inference.backends import InProcessBackend, get_backend

        self.fell_back = False
        self.fallback_reason: str | None = None
        self.backend: Any = None
        self._backend_args = (backend, dict(backend_kwargs or {}))
        self._retry_at = 0.0
        try:
            self.backend = (InProcessBackend(loaded=loaded) if loaded is not None
                            else get_backend(backend, self.model_dir, **self._backend_args[1]))  # fmt: skip
        except Exception as e:
            self._no_model(e)

    def _no_model(self, e: Exception) -> None:
        self.fell_back = True
        self.fallback_reason = f"{type(e).__name__}: {e}"
        self._retry_at = time.monotonic() + RETRY_S
        # the records' and /status's reason: the latest failure (a directory that appeared, corrupt)
        self.last_step = StepStatus(fallback=True, reason=self.fallback_reason)

    def _retry(self) -> None:
        """Without a model, look again every ``RETRY_S`` (a worker started before the first
        ``semsched train`` picks the model up once it is published)."""
        if not self.fell_back or time.monotonic() < self._retry_at:
            return
        from inference.backends import get_backend

        try:
            self.backend = get_backend(self._backend_args[0], self.model_dir, **self._backend_args[1])
        except Exception as e:
            self._no_model(e)
            return
        self.fell_back, self.fallback_reason = False, None
        self.last_step = StepStatus(backend=self.backend.name, version=self.model_version)

    @property
    def loaded(self) -> Any:
        return None if self.backend is None else self.backend.loaded

    @property
    def model_version(self) -> str | None:
        return None if self.backend is None else str(self.backend.loaded.version)

    @property
    def spec(self) -> Any:
        return self.backend.loaded.config.spec
