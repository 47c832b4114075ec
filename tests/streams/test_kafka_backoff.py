"""streams/kafka_backoff.py: with every broker gone, a client waits its retry backoff between
failed metadata updates instead of asking again at once (a worker spun at 100 % and logged ~40 MB
a minute)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.structs import BrokerMetadata

from ops.local_stack import free_port
from streams.kafka_backoff import pace_failed_metadata_updates

FAILED_UPDATE = "Unable to update metadata from %s"  # aiokafka/client.py's line for a failed update


def test_the_pinned_aiokafka_has_the_method_the_pacing_wraps() -> None:
    assert pace_failed_metadata_updates() is True
    assert pace_failed_metadata_updates() is True  # installed once
    assert getattr(AIOKafkaClient._metadata_update, "_semsched_paced", False)


async def test_failed_metadata_updates_wait_the_retry_backoff(caplog: pytest.LogCaptureFixture) -> None:
    """What aiokafka's fetcher and sender do while a partition has no leader: force an update and
    wait for it, in a loop. Here the cached metadata names a broker on a port nothing listens on
    (as after the worker's broker stopped)."""
    pace_failed_metadata_updates()
    port = free_port()
    client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{port}", retry_backoff_ms=100, request_timeout_ms=1000)
    client._api_version = (2, 8, 0)  # (bootstrap would have asked the broker)
    client.cluster._brokers = {1: BrokerMetadata(1, "127.0.0.1", port, None)}
    client._sync_task = asyncio.create_task(client._md_synchronizer())
    updates = 0
    try:
        with caplog.at_level(logging.ERROR, logger="aiokafka"):
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.0:
                assert await client.force_metadata_update() is False
                updates += 1
    finally:
        await client.close()
    failed = [r for r in caplog.records if r.msg == FAILED_UPDATE]
    assert updates >= 3, f"only {updates} updates in a second: the backoff is longer than asked"
    # 100 ms apart: ~10 in a second (unpaced: thousands, each logged)
    assert updates <= 20 and len(failed) <= 20, f"{updates} updates, {len(failed)} logged failures in one second"
