"""Create every semsched topic up front, all with the same partition count (the Faust
tables' changelogs must match their source topics, and every topic is partitioned by
cluster so one worker sees a whole cluster)."""

from __future__ import annotations

import contextlib

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.settings import TOPICS, Settings


async def ensure_topics(settings: Settings, extra: tuple[str, ...] = ()) -> list[str]:
    """Create missing topics (idempotent); returns the full names of those it created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [settings.topic(t) for t in (*TOPICS, *extra)]
        missing = [t for t in wanted if t not in existing]
        if missing:
            configs = {"max.message.bytes": str(max(settings.max_message_bytes * 4, 1024 * 1024))}
            with contextlib.suppress(TopicAlreadyExistsError):  # a concurrent creator won
                await admin.create_topics(
                    [NewTopic(t, num_partitions=settings.partitions, replication_factor=1,
                              topic_configs=configs) for t in missing]  # fmt: skip
                )
        return missing
    finally:
        await admin.close()
