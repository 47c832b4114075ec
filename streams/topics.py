"""Create every semsched topic up front, all with the same partition count (the Faust
tables' changelogs must match their source topics, and every topic is partitioned by
cluster so one worker sees a whole cluster).

Faust's own topic creation uses a CreateTopics request version that Kafka 4.x no longer
accepts, so the worker's changelog topics are created here too (compacted) and Faust is
told not to declare topics.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.settings import TOPICS, Settings


async def ensure_topics(settings: Settings, changelogs: tuple[str, ...] = ()) -> list[str]:
    """Create missing topics (idempotent); ``changelogs`` are full names of compacted
    table changelogs. Returns the full names of the topics it created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        size = str(max(settings.max_message_bytes * 4, 1024 * 1024))
        wanted = {settings.topic(t): {"max.message.bytes": size} for t in TOPICS}
        wanted |= {t: {"max.message.bytes": size, "cleanup.policy": "compact"} for t in changelogs}
        missing = {t: c for t, c in wanted.items() if t not in existing}
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # a concurrent creator won
                await admin.create_topics(
                    [NewTopic(t, num_partitions=settings.partitions, replication_factor=1, topic_configs=c)
                     for t, c in missing.items()]  # fmt: skip
                )
            # KRaft propagates new topics to the brokers' metadata asynchronously: wait for it
            for _ in range(100):
                if set(missing) <= set(await admin.list_topics()):
                    break
                await asyncio.sleep(0.1)
        return sorted(missing)
    finally:
        await admin.close()
