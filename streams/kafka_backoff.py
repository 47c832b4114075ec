"""A failed metadata update waits ``retry_backoff_ms`` before the next one (aiokafka does not).

aiokafka's fetcher (``consumer/fetcher.py``, the ``invalid_metadata`` branch) and its producer's
sender (``producer/sender.py``, ``unknown_leaders_exist``) ask for a metadata update and wait for
it whenever the cached metadata names a partition without a leader; a failed update keeps that
metadata, so with every broker gone they ask again at once. Found on a worker whose only broker was
stopped: each failed update took ~0.1 ms and logged two lines ("Unable connect to node ...",
"Unable to update metadata from ..."), ~8,600 updates a second per client: 100 % of a core and a
1 GB log in 25 minutes, for as long as the broker stayed away. A successful update is not delayed;
a failed one now waits the client's own ``retry_backoff_ms`` (100 ms by default): ten tries a
second, each still logged, and the worker picks the broker up again within a backoff of its return.

The patch is on a private method of the pinned aiokafka (constraints.txt); a version without it
is left as it is, with a warning (tests/streams/test_kafka_backoff.py fails on it first).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("semsched.kafka")

_PACED = "_semsched_paced"


def pace_failed_metadata_updates() -> bool:
    """Install the pacing on ``AIOKafkaClient._metadata_update`` (once). False when this aiokafka
    has no such method (nothing installed, a warning logged)."""
    from aiokafka.client import AIOKafkaClient

    update: Callable[..., Awaitable[bool]] | None = getattr(AIOKafkaClient, "_metadata_update", None)
    if update is None:
        log.warning("aiokafka %s has no AIOKafkaClient._metadata_update: failed metadata updates are "
                    "not paced (a client whose brokers are all gone may spin)", _version())  # fmt: skip
        return False
    if getattr(update, _PACED, False):
        return True

    @functools.wraps(update)
    async def paced(self: Any, cluster_metadata: Any, topics: Any) -> bool:
        updated = await update(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(self._retry_backoff)
        return updated

    setattr(paced, _PACED, True)
    AIOKafkaClient._metadata_update = paced  # type: ignore[method-assign]
    return True


def _version() -> str:
    import aiokafka

    return str(getattr(aiokafka, "__version__", "?"))
