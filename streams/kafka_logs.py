"""aiokafka's log, as an operator should read it (:func:`tame_kafka_client_logs`).

aiokafka logs every failed group-coordinator lookup at ERROR and then retries it. On a normal
start against a fresh broker the first lookup fails with ``GroupCoordinatorNotAvailable``
while the broker creates ``__consumer_offsets`` (and again while a coordinator moves): an
``[ERROR]`` line in the worker's log for something that heals by itself within a second. A
retriable failure is logged as a WARNING that says it is being retried (still every time, so a
coordinator that never comes back stays visible); a failure aiokafka does not retry stays an ERROR.

While a broker is away, aiokafka logs each failed connection and metadata update, two lines per
attempt: paced (streams/kafka_backoff.py), still ~20 lines a second, 7.4 KB/s (~640 MB a day) in the
worker's log. :class:`CollapsedRepeats` lets a warning or error through, holds back the same line
(logger, level and the whole message: another node or another error is another line) for ``every_s``
(10 s) after it, and the next one let through says how many it held back. A line that stops
repeating has its last count told by :func:`tell_untold_repeats` (the worker calls it every few
seconds, the agents at each telemetry tick: before, it went untold, and the log's last line of an
outage came up to 10 s before its end); a new line, and any with a traceback, is logged at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
_LOOKUP_FAILED = "Group Coordinator Request failed: %s"
MAX_KINDS = 1000  # distinct lines CollapsedRepeats remembers before it lets go of those past their interval


class RetriedCoordinatorLookup(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno == logging.ERROR and record.msg == _LOOKUP_FAILED and isinstance(record.args, tuple)
                and record.args and getattr(record.args[0], "retriable", False)):  # fmt: skip
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.msg = _LOOKUP_FAILED + " (retriable: retrying)"
        return True


class CollapsedRepeats(logging.Filter):
    """The same warning or error again within ``every_s`` of the last one let through is held back and
    counted; the next one let through says how many were (module docstring)."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s = every_s
        self.clock = clock
        self._shown: dict[tuple[str, int, str], float] = {}  # kind -> when one was last let through
        self._held: dict[tuple[str, int, str], int] = {}  # kind -> how many were held back since

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.exc_info:
            return True
        try:
            kind = (record.name, record.levelno, record.getMessage())
        except Exception:  # (a record whose arguments do not fit its message: logging reports it itself)
            return True
        now = self.clock()
        if len(self._shown) > MAX_KINDS:  # (lines that name changing things: keep those still in their interval)
            self._shown = {k: t for k, t in self._shown.items() if now - t < self.every_s}
            self._held = {k: n for k, n in self._held.items() if k in self._shown}
        shown = self._shown.get(kind)
        if shown is not None and now - shown < self.every_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._shown[kind] = now
        if held := self._held.pop(kind, 0):
            record.msg, record.args = f"{kind[2]} (and {held:,} more like it in the {now - shown:.0f} s before, not logged)", ()
        return True


    def untold(self) -> list[tuple[str, int, str, int, float]]:
        """``(logger, level, message, how many, over how many s)`` of each line held back whose interval
        is over with none let through since (which would have said so); each is told once."""
        now = self.clock()
        out = []
        for kind, held in list(self._held.items()):
            shown = self._shown.get(kind)
            if shown is None or now - shown >= self.every_s:
                del self._held[kind]
                out.append((*kind, held, now - shown if shown is not None else 0.0))
        return out


_COLLAPSED: list[tuple[logging.Logger, CollapsedRepeats]] = []  # where tame_kafka_client_logs installed one


def tell_untold_repeats() -> int:
    """Log, on its own logger, each line held back whose interval is over (:meth:`CollapsedRepeats.untold`):
    how many more like it came. How many lines that logged."""
    n = 0
    for logger, collapsed in list(_COLLAPSED):
        for _, level, message, held, span in collapsed.untold():
            logger.log(level, "%s (and %s more like it in the %.0f s since, not logged)", message, f"{held:,}", span)
            n += 1
    return n


def tame_kafka_client_logs() -> None:
    """Install :class:`RetriedCoordinatorLookup` on aiokafka's coordinator logger, then :class:`CollapsedRepeats`
    on each of aiokafka's loggers (once; a filter applies to its own logger's records only)."""
    import aiokafka  # noqa: F401  (its modules' loggers exist once it is imported)

    coordinator = logging.getLogger(COORDINATOR_LOGGER)
    if not any(isinstance(f, RetriedCoordinatorLookup) for f in coordinator.filters):
        coordinator.addFilter(RetriedCoordinatorLookup())
    for name in [n for n in list(logging.root.manager.loggerDict) if n == "aiokafka" or n.startswith("aiokafka.")]:
        logger = logging.getLogger(name)
        if not any(isinstance(f, CollapsedRepeats) for f in logger.filters):
            collapsed = CollapsedRepeats()
            logger.addFilter(collapsed)
            _COLLAPSED.append((logger, collapsed))
