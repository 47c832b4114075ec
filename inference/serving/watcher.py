"""``Watcher``: a daemon thread that runs a check every few seconds, for the hosts that load new
model versions beside the serving one (:class:`~inference.serving.host.ModelHost`,
:class:`~inference.serving.predictor.DurationHost`) instead of on a request's path."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("semsched.serving")

MIN_INTERVAL_S = 0.1  # --watch 0 checks this often (it meant "at every request" before the thread)


class Watcher:
    def __init__(self, check: Callable[[], None], interval_s: float, name: str) -> None:
        self.check, self.interval_s, self.name = check, max(interval_s, MIN_INTERVAL_S), name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the thread must outlive one bad check
                log.exception("%s: checking for a new version failed", self.name)

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop checking; waits ``timeout_s`` at most for a check under way (a model load) to end."""
        self._stop.set()
        self._thread.join(timeout_s)
