"""aiokafka's log, as an operator should read it.

aiokafka logs every failed group-coordinator lookup at ERROR and then retries it. On a normal
start against a fresh broker the first lookup fails with ``GroupCoordinatorNotAvailable``
while the broker creates ``__consumer_offsets`` (and again while a coordinator moves): an
``[ERROR]`` line in the worker's log for something that heals by itself within a second. A
retriable failure is logged as a WARNING that says it is being retried (still every time, so a
coordinator that never comes back stays visible); a failure aiokafka does not retry stays an ERROR.
"""

from __future__ import annotations

import logging

COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
_LOOKUP_FAILED = "Group Coordinator Request failed: %s"


class RetriedCoordinatorLookup(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno == logging.ERROR and record.msg == _LOOKUP_FAILED and isinstance(record.args, tuple)
                and record.args and getattr(record.args[0], "retriable", False)):  # fmt: skip
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.msg = _LOOKUP_FAILED + " (retriable: retrying)"
        return True


def quiet_retried_coordinator_lookups() -> None:
    """Install :class:`RetriedCoordinatorLookup` on aiokafka's coordinator logger (once)."""
    logger = logging.getLogger(COORDINATOR_LOGGER)
    if not any(isinstance(f, RetriedCoordinatorLookup) for f in logger.filters):
        logger.addFilter(RetriedCoordinatorLookup())
