"""``ModelHost``: the model version a Triton server answers with, swapped without a restart.

The server serves ONE Triton version per model name and swaps the weights inside the
inference callables (one host in each model's Python-backend stub), so a new version needs no
new repository directory and no model reload through Triton's control API: the host re-resolves ``model_dir`` (usually the ``models/latest``
symlink that ``semsched train`` and promotion repoint) every ``watch_s`` seconds and, when it
points at another directory, loads it and answers every later request with it. In a server
(:meth:`ModelHost.watch`) that check runs in a thread of its own: a new version is loaded, checked
and its parts built (a MiniLM encoder, ~10 s on a CPU) beside the serving one, whose requests are
answered meanwhile; without it (a host used directly) ``current()`` checks on the caller's path. Every
answer carries a ``VERSION`` output, so the client records which version decided and keeps
its local copy of the same version. A version that fails to load is logged once
(``reload_error``) and the current one keeps serving.

**Device.** The host loads every version, the first and each one swapped in, on ONE torch device
(``semsched serve --device``, resolved once by :func:`pick_device`): the ``policy`` and
``predictor`` models run the host's scorer, so they run where it is; ``job_encoder`` puts its
MiniLM encoder on the same device. The worker's local copy (in-step re-scoring) stays on CPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from inference.serving.version_agreement import READY, REFUSED, VersionAgreement
from inference.serving.watcher import Watcher

log = logging.getLogger("semsched.serving")


def pick_device(requested: str = "auto") -> str:
    """``cuda`` when asked for (or ``auto``) and torch sees a GPU, else ``cpu``; logs the choice.
    An explicit ``cuda`` without a GPU is a logged fallback to ``cpu`` (the server still serves)."""
    import torch

    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {requested!r}")
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        log.warning("device cuda requested but torch sees no GPU (torch %s): using cpu", torch.__version__)
    elif requested == "auto" and not has_cuda and (visible := gpu_made_visible()):
        # the compose service reserves a GPU and asks for auto: a CPU-only torch or a driver torch
        # cannot use must not pass for a deliberate CPU server (it was one INFO line)
        log.warning("a GPU is made visible to this process (%s) but torch sees none (torch %s, built for CUDA "
                    "%s): using cpu", visible, torch.__version__, torch.version.cuda or "none")  # fmt: skip
    device = "cuda" if requested in ("auto", "cuda") and has_cuda else "cpu"
    if device == "cuda" and (why := cuda_fails()):  # torch lists a GPU it cannot run on: a torch built without
        log.warning("torch sees a GPU but cannot run on it (%s; torch %s, built for CUDA %s): using cpu", why,  # kernels
                    torch.__version__, torch.version.cuda or "none")  # for its architecture, a driver too old
        device = "cpu"  # (found by review: the models' first CUDA op failed in their stubs, and the server exited)
    log.info("serving device: %s%s", device, f" ({torch.cuda.get_device_name(0)})" if device == "cuda" else "")
    return device


def cuda_fails() -> str | None:
    """Why a tiny op on the first GPU fails (``None``: it runs)."""
    import torch

    try:
        torch.ones(8, device="cuda").add_(1).sum().item()
    except Exception as e:  # noqa: BLE001 - any failure: no kernel image, an old driver, out of memory
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return None


def gpu_made_visible() -> str | None:
    """What says a GPU was given to this process (a container's ``NVIDIA_VISIBLE_DEVICES``, as the NVIDIA
    container runtime sets it, or ``CUDA_VISIBLE_DEVICES``), else None."""
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value and value.lower() not in ("void", "none", "-1"):
            return f"{name}={value}"
    return None


class ModelHost:
    """The serving :class:`~inference.model.io.LoadedModel` of ``model_dir``, hot-swapped (thread-safe),
    every version on ``device`` (a resolved torch device, :func:`pick_device`'s answer)."""

    def __init__(self, model_dir: Path, *, watch_s: float = 1.0, device: str = "cpu",
                 agreement: VersionAgreement | None = None) -> None:  # fmt: skip
        """``agreement``: this server's other models' hosts, which swap together with this one
        (:mod:`inference.serving.version_agreement`; None: a host that swaps alone)."""
        from inference.model.io import load_model, version_mark

        self.model_dir = Path(model_dir)
        self.agreement = agreement
        self._pending: Any = None  # a version ready here, waiting for the other models' verdicts
        self.watch_s = watch_s
        self.device = device
        self.loaded = load_model(self.model_dir, device)
        self.reload_error: str | None = None
        self.swaps = 0
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self._listeners: list[Any] = []
        self._refusal_listeners: list[Any] = []
        self._guards: list[Any] = []
        self._refused: set[tuple[Path, int]] = set()  # versions not to load again (inference.model.io.reload_if_moved)
        self._watcher: Watcher | None = None
        if agreement is not None:  # what a host serves, it is ready for: the others may come back to it (found by a
            with contextlib.suppress(OSError):  # test: latest moved on and back before this host swapped, and the
                # others waited for its verdict on the version it had never left)
                agreement.say(version_mark(Path(self.loaded.path)), READY)

    @property
    def version(self) -> str:
        return str(self.loaded.version)

    def on_swap(self, listener: Any) -> None:
        """Call ``listener(loaded)`` before every swap (the models rebuild their caches); a listener that
        raises refuses the version."""
        self._listeners.append(listener)

    def on_refuse(self, listener: Any) -> None:
        """Call ``listener(loaded)`` when a version the ``on_swap`` listeners prepared is refused after all
        (another model of the server refused it): what they built for it can go."""
        self._refusal_listeners.append(listener)

    def watch(self) -> None:
        """From now on, check ``model_dir`` every ``watch_s`` in a daemon thread, not in ``current()``.
        Found by review: on a request's path, a version with another text encoder held ``job_encoder``
        ~10 s while MiniLM loaded, and every worker's step timed out to its fallback meanwhile."""
        if self._watcher is None:
            self._watcher = Watcher(self._watched_check, self.watch_s, "semsched-model-watch")

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def _watched_check(self) -> None:
        with self._lock:
            try:
                self._check()
            finally:
                self._checked = time.monotonic()

    def current(self) -> Any:
        """The loaded model to answer this request with (checks ``model_dir`` every ``watch_s`` unless a
        thread does, :meth:`watch`)."""
        if self._watcher is None and time.monotonic() - self._checked >= self.watch_s:
            with self._lock:
                if time.monotonic() - self._checked >= self.watch_s:
                    self._check()
                    self._checked = time.monotonic()
        return self.loaded

    def _check(self) -> None:
        from inference.model.io import reload_if_moved, version_mark

        pending, self._pending = self._pending, None
        if pending is not None and self._agree(pending):  # swapped, refused, or still waiting for the others
            return  # (else let go, latest having moved on: look at what it names now)
        try:
            fresh = reload_if_moved(self.model_dir, self.loaded, self.device, self._refused)
        except Exception as e:  # a missing link, a half-written or broken version: keep serving the current one
            reason = f"{self.model_dir}: {type(e).__name__}: {e}"
            self._failed(reason)
            if self.agreement is not None:  # (the others must not swap to a version that does not load here)
                with contextlib.suppress(OSError):
                    self.agreement.say(version_mark(Path(self.model_dir).resolve(strict=True)), REFUSED, reason)
            return
        if fresh is None:
            return
        for guard in self._guards:  # e.g. the policy model's bound Triton outputs cannot change
            try:
                problem = guard(fresh)
            except Exception as e:  # (found by review: a guard that raised, a CUDA OOM on its test batch say,
                problem = f"its check failed: {type(e).__name__}: {e}"  # failed every request, reloading it each time)
            if problem:
                self._refuse(fresh, problem)
                return
        try:  # the models' own parts for it (the job encoder's), before it serves: a failure keeps the current
            for listener in self._listeners:  # one (found by review: the old encoder answered under the new name)
                listener(fresh)
        except Exception as e:
            self._refuse(fresh, f"{type(e).__name__}: {e}")
            return
        if self.agreement is None:
            self._swap(fresh)
            return
        with contextlib.suppress(OSError):
            self.agreement.say(version_mark(Path(fresh.path)), READY)
        self._agree(fresh)

    def _names(self, loaded: Any) -> bool:
        """Whether ``model_dir`` still resolves to ``loaded``'s directory."""
        try:
            return Path(self.model_dir).resolve(strict=True) == Path(loaded.path)
        except OSError:
            return False

    def _agree(self, fresh: Any) -> bool:
        """Swap to ``fresh`` once every model of the server is ready for it (even if latest moved on since:
        the others swap to it too, found by review, and all move on together); refuse it once one refused it;
        let it go when latest moved on before every model was ready (found by review: the others had let it
        go, their verdicts stood, and this one swapped to it alone). False when it let it go."""
        from inference.model.io import version_mark

        assert self.agreement is not None
        try:
            verdict, detail = self.agreement.verdict(version_mark(Path(fresh.path)))
        except OSError as e:  # (the version's files gone meanwhile)
            verdict, detail = REFUSED, f"{type(e).__name__}: {e}"
        if verdict == READY:
            self._swap(fresh)
            return True
        if verdict == REFUSED:
            self._dropped(fresh)
            self._refuse(fresh, detail, say=False)
            return True
        if not self._names(fresh):
            self._let_go(fresh)
            return False
        if self.reload_error != (waiting := f"{fresh.path}: ready here, waiting for the {detail} model(s)"):
            log.info("model version %s %s", fresh.version, waiting.partition(": ")[2])
        self.reload_error, self._pending = waiting, fresh
        return True

    def _let_go(self, fresh: Any) -> None:
        """Let ``fresh`` go, latest having moved on: its verdict taken back, its prepared parts dropped."""
        from inference.model.io import version_mark

        if self.agreement is not None:
            with contextlib.suppress(OSError):
                self.agreement.withdraw(version_mark(Path(fresh.path)))
        self._dropped(fresh)

    def _dropped(self, fresh: Any) -> None:
        for listener in self._refusal_listeners:
            with contextlib.suppress(Exception):
                listener(fresh)

    def _swap(self, fresh: Any) -> None:
        old, self.loaded, self.reload_error = self.version, fresh, None
        self.swaps += 1
        log.info("model version %s -> %s (%s)", old, fresh.version, fresh.path)

    def _refuse(self, fresh: Any, problem: str, *, say: bool = True) -> None:
        from inference.model.io import version_mark

        with contextlib.suppress(OSError):  # (gone meanwhile: found by review, the error escaped the check)
            mark = version_mark(Path(fresh.path))
            self._refused.add(mark)
            if say and self.agreement is not None:
                self.agreement.say(mark, REFUSED, problem)
        self._failed(f"{fresh.path}: {problem}")

    def guard(self, check: Any) -> None:
        """``check(loaded) -> reason | None``: a version with a reason is not swapped in."""
        self._guards.append(check)

    def _failed(self, reason: str) -> None:
        if reason != self.reload_error:
            log.error("cannot load a new model version, still serving %s: %s", self.version, reason)
        self.reload_error = reason
