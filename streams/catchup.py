"""The gate that keeps a (re)started worker from scheduling on stale state.

The tables show what this worker decided only once its decisions are applied. After a
restart, or when partitions move to this worker, the ``decisions`` topic may hold
decisions the tables have not seen (published, then the worker died before its changelog
writes were flushed). Scheduling before they are replayed would decide those jobs again.

For every assigned partition the gate reads, once per assignment, the topic's end offset
and the worker group's committed offset: if the group has committed up to the end there
is nothing to replay; otherwise the partition is caught up once the decisions agent has
applied the message just before the end. A new assignment closes the gate again.

The committed offset can run ahead of the tables, on every input topic: Faust may commit an
event's offset before the changelog write of the transition it caused reaches the broker, so
a worker killed in between comes back with tables that miss the transition and an event
behind the committed offset, never replayed (seen once in the integration suite: a finished
job placed again on another node, its decision lost that way). So before the first step of
an assignment, :meth:`CatchUp.logged` reads the assigned partitions of the topics that change
the job tables (``RESTORED_TOPICS``) up to the group's committed offsets at assignment, with a
consumer of its own, and :mod:`streams.log_restore` applies what the tables lack. The writes
lost are those still in flight when the worker died, so the read starts a window of
``restore_window`` messages (100,000 per partition and topic; 0 = the whole log) before the
committed offset: a bounded read per assignment however long the topics are.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.offset_starts import committed_offsets
from streams.settings import Settings

#: the topics whose events change the job tables (telemetry is sent again by the nodes)
RESTORED_TOPICS = ("jobs.submitted", "decisions", "jobs.lifecycle")

log = logging.getLogger("semsched.catchup")


class CatchUp:
    def __init__(self, settings: Settings, topic: str, group_id: str) -> None:
        self.settings = settings
        self.topic = topic
        self.group_id = group_id
        self._assigned: frozenset[int] | None = None
        self._targets: dict[int, int] | None = None  # partition -> end offset still to apply
        self._committed: dict[TopicPartition, int] | None = None  # RESTORED_TOPICS' at assignment
        self.open = False
        self.log_applied = False  # the logs were read back into the tables (this assignment)

    async def _replay_targets(self, partitions: frozenset[int]) -> dict[int, int]:
        logs = [self.settings.topic(t) for t in RESTORED_TOPICS]
        tps = [TopicPartition(topic, p) for topic in logs for p in sorted(partitions)]
        consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            ends = await consumer.end_offsets(tps)
        finally:
            await consumer.stop()
        done = await committed_offsets(self.settings, self.group_id, tps)
        # what the live consumption will not bring again: up to the committed offset
        self._committed = {tp: min(done.get(tp, 0), end) for tp, end in ends.items()}
        return {tp.partition: end for tp, end in ends.items()
                if tp.topic == self.topic and end > done.get(tp, 0)}  # fmt: skip

    async def logged(self) -> dict[str, list[tuple[int, bytes]]]:
        """Per topic of ``RESTORED_TOPICS`` (its short name), ``(partition, value)`` of every message
        on the assigned partitions up to the group's committed offset read at assignment, from
        ``settings.restore_window`` messages before it (0: from the start), partition by
        partition, each in offset order: the events the tables must already hold, as the live
        consumption will not bring them again. Empty before an assignment was read."""
        upto = {tp: off for tp, off in (self._committed or {}).items() if off > 0}
        names = {self.settings.topic(t): t for t in RESTORED_TOPICS}
        out: dict[str, list[tuple[int, bytes]]] = {t: [] for t in RESTORED_TOPICS} if self._committed else {}
        if not upto:
            return out
        window = self.settings.restore_window
        consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(list(upto))
            first = await consumer.beginning_offsets(list(upto))  # (retention may have deleted the start)
            for tp, off in upto.items():
                consumer.seek(tp, max(first[tp], off - window) if window else first[tp])
            left = {tp for tp in upto if await consumer.position(tp) < upto[tp]}
            while left:
                batch = await consumer.getmany(*left, timeout_ms=1000)
                for tp, messages in batch.items():
                    out[names[tp.topic]] += [(tp.partition, m.value) for m in messages if m.offset < upto[tp]]
                left = {tp for tp in left if await consumer.position(tp) < upto[tp]}
        finally:
            await consumer.stop()
        for messages in out.values():
            messages.sort(key=lambda m: m[0])  # stable: each partition's messages stay in offset order
        return out

    async def ready(self, applied: dict[int, int], *, recovering: bool, assigned: set[int]) -> bool:
        """True once every assigned partition's decisions up to its end offset at assignment
        time are applied. Closed while tables recover and while nothing is assigned."""
        now = frozenset(assigned)
        if now != self._assigned:
            self._assigned, self._targets, self._committed, self.open, self.log_applied = now, None, None, False, False
            log.info("assignment of %s is now %s: scheduling waits to catch up", self.topic, sorted(now))
        if self.open:
            return True
        if recovering or not now:
            return False
        if self._targets is None:
            self._targets = await self._replay_targets(now)
            log.info("decisions to replay before scheduling (partition: end offset): %s", self._targets)
        if all(applied.get(p, -1) >= end - 1 for p, end in self._targets.items()):
            self.open = True
            log.info("caught up on %s: scheduling starts", self.topic)
        return self.open
