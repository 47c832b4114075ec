"""The gate that keeps a (re)started worker from scheduling on stale state.

Until the worker has recovered its tables and applied every decision already on the
``decisions`` topic (its own earlier output), the tables do not yet show what it placed
before the restart; scheduling then would place those jobs again. The end offsets are
read once, at start; after that the gate stays open.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.settings import Settings

log = logging.getLogger("semsched.catchup")


class CatchUp:
    def __init__(self, settings: Settings, topic: str) -> None:
        self.settings = settings
        self.topic = topic
        self._targets: dict[int, int] | None = None
        self.open = False

    async def _end_offsets(self) -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            parts = consumer.partitions_for_topic(self.topic) or set()
            if not parts:
                await consumer._client.force_metadata_update()  # topic metadata not cached yet
                parts = consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            ends = await consumer.end_offsets(tps) if tps else {}
            return {tp.partition: off for tp, off in ends.items()}
        finally:
            await consumer.stop()

    async def ready(self, applied: dict[int, int], *, recovered: bool = True,
                    assigned: set[int] | None = None) -> bool:  # fmt: skip
        """True once every (assigned) partition's start-time end offset has been applied."""
        if self.open:
            return True
        if not recovered:
            return False
        if self._targets is None:
            self._targets = await self._end_offsets()
            log.info("catch-up targets for %s: %s", self.topic, self._targets)
        behind = {
            p: end for p, end in self._targets.items()
            if end > 0 and (assigned is None or p in assigned) and applied.get(p, -1) < end - 1
        }  # fmt: skip
        if not behind:
            self.open = True
            log.info("caught up on %s: scheduling starts", self.topic)
        return self.open
