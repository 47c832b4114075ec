"""The backend contract the ``learned`` policy calls once per scheduling step.

A backend holds a local copy of the serving model version (``loaded``): its feature spec
builds the step's inputs, and its policy head re-scores, within a step, the nodes that earlier
placements of that step changed (a few ``[M, W]`` ops; the step's heavy part — the fusion
encoder and the head over every (job, node) — is the backend's call).

``policy`` / ``policy_async`` return :func:`inference.model.step.run_policy`'s arrays plus
``version`` (the model version that answered). A failure — Triton down, a missed deadline,
a malformed answer — raises :class:`BackendError` with a reason; the policy then decides that
step with its fallback heuristic and the decision records say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from inference.model.step import PolicyInputs


class BackendError(RuntimeError):
    """The backend could not answer this step (the message is the reason recorded on decisions).
    ``answered``: the server itself refused the call (it is up and said why); False for a missed
    deadline, a server out of reach, a malformed answer."""

    def __init__(self, message: str, *, answered: bool = False) -> None:
        super().__init__(message)
        self.answered = answered


class Backend(Protocol):
    name: str
    loaded: Any  # inference.model.io.LoadedModel: the local copy of the serving version
    #: True: ``policy`` computes the pair features itself from the inputs' compact node arrays
    #: (``source``), so the caller may send the inputs without them (:mod:`inference.step_call`)
    computes_pairs: bool

    def refresh(self) -> bool:
        """Pick up a new model version if one was published; True when it changed."""
        ...

    def policy(self, inputs: PolicyInputs, deadline_ms: float | None = None) -> dict[str, Any]:
        """``deadline_ms``: a remote backend's bound on this call, when less than its own (in-process: none)."""
        ...

    async def policy_async(self, inputs: PolicyInputs) -> dict[str, Any]: ...

    async def encode_async(self, cleaned_texts: Sequence[str]) -> np.ndarray:
        """float32 ``[len(texts), text_dim]``: the job encoder on texts already cleaned."""
        ...

    def encode(self, cleaned_texts: Sequence[str], deadline_ms: float | None = None) -> np.ndarray:
        """:meth:`encode_async`, blocking (``deadline_ms`` as for :meth:`policy`)."""
        ...

    def close(self) -> None: ...
