"""The gate that keeps a (re)started worker from scheduling on stale state.

The tables show what this worker decided only once its decisions are applied. After a
restart, or when partitions move to this worker, the ``decisions`` topic may hold
decisions the tables have not seen (published, then the worker died before its changelog
writes were flushed). Scheduling before they are replayed would decide those jobs again.

For every assigned partition the gate reads, once per assignment, the topic's end offset
and the worker group's committed offset: if the group has committed up to the end there
is nothing to replay; otherwise the partition is caught up once the decisions agent has
applied the message just before the end. Every assignment closes the gate again
(:meth:`CatchUp.reassigned`, on Faust's ``on_partitions_assigned``), the same set of partitions
too: between two of the loop's steps a partition can go to another worker for a generation,
which decides there, and come back.

The same gate over ``jobs.lifecycle`` holds the confirmation timeouts (``streams/loop.py``):
a reservation is timed out only once the lifecycle reports already on the topic at the
assignment are applied. Before, a restarted worker timed out reservations whose ``started``
(and ``finished``) were still behind in that backlog, and published false ``timed_out`` notices.

Decisions are not the only events whose effect a restart can lose: Faust may commit an
event's offset before the changelog write of the transition it caused reaches the broker.
Those are restored from the input logs while the streams are still paused after recovery
(:mod:`streams.log_restore`); the loop counts the restore as recovering (no step, no gate counting)
from the assignment until it is over.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.offset_starts import start_offsets
from streams.settings import Settings

log = logging.getLogger("semsched.catchup")


class CatchUp:
    def __init__(self, settings: Settings, topic: str, group_id: str, holds: str = "scheduling") -> None:
        self.settings = settings
        self.topic = topic
        self.holds = holds  # what waits for it, in the log lines
        self.group_id = group_id
        self._assigned: frozenset[int] | None = None
        self._targets: dict[int, int] | None = None  # partition -> end offset still to apply
        self.open = False

    async def _replay_targets(self, partitions: frozenset[int]) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer = AIOKafkaConsumer(bootstrap_servers=self.settings.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            ends = {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
        finally:
            await consumer.stop()
        # from where the group's consumer starts: its committed offset, but never before the first record
        # still on the broker (found by review: with the partition emptied by retention and the group's
        # offset expired or older, the gate waited for a record that would never come)
        done = {tp.partition: off for tp, off in (await start_offsets(self.settings, self.group_id, tps)).items()}
        return {p: end for p, end in ends.items() if end > done.get(p, 0)}

    def reassigned(self) -> None:
        """A rebalance assigned this worker its partitions: close until caught up again."""
        self._assigned, self._targets, self.open = None, None, False

    async def on_partitions_assigned(self, sender: object = None, *args: object, **kwargs: object) -> None:
        """Faust's ``app.on_partitions_assigned`` receiver (:meth:`reassigned`)."""
        self.reassigned()

    async def ready(self, applied: dict[int, int], *, recovering: bool, assigned: set[int]) -> bool:
        """True once every assigned partition's events up to its end offset at assignment
        time are applied (``applied``: partition → the last offset handled). After every
        assignment (:meth:`reassigned`) or a change of the set, closed while tables recover and
        while nothing is assigned."""
        now = frozenset(assigned)
        if now != self._assigned:
            self._assigned, self._targets, self.open = now, None, False
            log.info("assignment of %s is now %s: %s waits to catch up", self.topic, sorted(now), self.holds)
        if self.open:
            return True
        if recovering or not now:
            return False
        if self._targets is None:
            targets = await self._replay_targets(now)
            if self._assigned != now:  # a reassignment overtook the lookup: its ends are the old set's (review)
                return False
            self._targets = targets
            log.info("%s to apply before %s (partition: end offset): %s", self.topic, self.holds, self._targets)
        if all(applied.get(p, -1) >= end - 1 for p, end in self._targets.items()):
            self.open = True
            log.info("caught up on %s: %s starts", self.topic, self.holds)
        return self.open
