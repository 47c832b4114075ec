"""Create every semsched topic up front, all with the same partition count (the Faust
tables' changelogs must match their source topics, and every topic is partitioned by
cluster so one worker sees a whole cluster).

Faust's own topic creation uses a CreateTopics request version that Kafka 4.x no longer
accepts, so the worker's changelog topics are created here too (compacted) and Faust is
told not to declare topics.

Each topic gets ``SEMSCHED_REPLICATION_FACTOR`` replicas (1, the single local broker's; a
production cluster's 3, say, with the brokers' ``min.insync.replicas``: the producers write with
``acks=all``). A topic the broker refuses to create is :class:`TopicsRefused`, with the broker's reason.

**Topics that exist already must have ``SEMSCHED_PARTITIONS`` partitions.** Events are routed
by ``crc32(cluster) % partitions`` with the setting's count: with more set than a topic has,
some clusters' events were refused by the client ("Unrecognized partition"); with fewer, the
worker's tables and their changelogs disagreed with the topics they mirror. A mismatch is
:class:`PartitionCountError`, naming the topics and both counts, before anything is sent.
"""

from __future__ import annotations

import asyncio

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from scheduling.events import name_some
from streams.settings import TOPICS, Settings

REQUEST_TIMED_OUT = 7  # a CreateTopics answer's error: the controller may still create the topic


class TopicSetupError(ValueError):
    """The topics cannot be set up as the settings ask: the message says which and why."""


class TopicsRefused(TopicSetupError):
    """The broker refused to create topics (``refused``: name → its reason), e.g. a replication factor
    above its broker count. aiokafka hands the per-topic errors back in the answer without raising:
    before, they were not read, and the caller went on as if the topics existed."""

    def __init__(self, refused: dict[str, str]) -> None:
        listed = name_some([f"{t}: {why}" for t, why in sorted(refused.items())], "; ", most=3)
        super().__init__(f"the broker refused to create {len(refused)} topic(s): {listed}")
        self.refused = refused


class PartitionCountError(TopicSetupError):
    """Existing topics whose partition count is not ``SEMSCHED_PARTITIONS`` (module docstring)."""

    def __init__(self, expected: int, found: dict[str, int]) -> None:
        counts = sorted(set(found.values()))
        listed = name_some([f"{t} ({n})" for t, n in sorted(found.items())], most=3)
        hint = f"set SEMSCHED_PARTITIONS={counts[0]}, or " if len(counts) == 1 else ""
        super().__init__(
            f"SEMSCHED_PARTITIONS is {expected}, but these topics have another partition count: {listed}. "
            f"Every event is routed by crc32(cluster) % SEMSCHED_PARTITIONS, so the two must agree: {hint}give this "
            "set-up topics of its own (SEMSCHED_TOPIC_PREFIX)"
        )
        self.expected, self.found = expected, found


def check_partitions(expected: int, counts: dict[str, int]) -> None:
    """Raise :class:`PartitionCountError` if any topic of ``counts`` (name: partitions) has another count."""
    if wrong := {t: n for t, n in counts.items() if n != expected}:
        raise PartitionCountError(expected, wrong)


async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    if not topics:  # (an empty list would ask for every topic of the cluster)
        return {}
    return {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(topics) if d["partitions"]}


async def _counts_when_known(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    """The partition counts of ``topics``, which exist: waited for while their metadata has not reached the
    broker asked yet (10 s at most; then those known)."""
    counts: dict[str, int] = {}
    for _ in range(100):
        if len(counts := await _partition_counts(admin, topics)) == len(topics):
            break
        await asyncio.sleep(0.1)
    return counts


async def ensure_topics(settings: Settings, changelogs: tuple[str, ...] = ()) -> list[str]:
    """Create missing topics (idempotent); ``changelogs`` are full names of compacted
    table changelogs. Returns the full names of the topics it created; raises
    :class:`PartitionCountError`, creating none, if an existing one has another partition count (or
    one another process created meanwhile has), and :class:`TopicsRefused` if the broker refuses some."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        size = str(max(settings.max_message_bytes * 4, 1024 * 1024))
        wanted = {settings.topic(t): {"max.message.bytes": size} for t in TOPICS}
        wanted |= {t: {"max.message.bytes": size, "cleanup.policy": "compact"} for t in changelogs}
        missing = {t: c for t, c in wanted.items() if t not in existing}
        # before creating any: a mismatch leaves the broker as it was
        check_partitions(settings.partitions, await _partition_counts(admin, sorted(set(wanted) - set(missing))))
        if missing:  # a dry run first: a topic the listing missed exists (KRaft propagates new topics to the
            # brokers' metadata asynchronously: found when one created just before was listed without it, and the
            # others were created before its count was seen); its count is checked before any is created
            dry = await admin.create_topics(
                [NewTopic(t, num_partitions=settings.partitions, replication_factor=settings.replication_factor,
                          topic_configs=c) for t, c in missing.items()], validate_only=True)  # fmt: skip
            unlisted = sorted(e["topic"] for e in dry.to_object()["topic_errors"]
                              if e["error_code"] == TopicAlreadyExistsError.errno)  # fmt: skip
            check_partitions(settings.partitions, await _counts_when_known(admin, unlisted))
            missing = {t: c for t, c in missing.items() if t not in unlisted}
        if missing:
            answer = await admin.create_topics(
                [NewTopic(t, num_partitions=settings.partitions, replication_factor=settings.replication_factor,
                          topic_configs=c) for t, c in missing.items()]  # fmt: skip
            )
            errors = {e["topic"]: e for e in answer.to_object()["topic_errors"] if e["error_code"] != 0}
            raced = sorted(t for t, e in errors.items() if e["error_code"] == TopicAlreadyExistsError.errno)
            refused = {t: f"{e['error_message'] or 'error'} (Kafka error {e['error_code']})"
                       for t, e in errors.items() if t not in raced}  # fmt: skip
            if any(errors[t]["error_code"] == REQUEST_TIMED_OUT for t in refused):  # the controller may go on
                await asyncio.sleep(1.0)
                now = set(await admin.list_topics())
                refused = {t: why for t, why in refused.items() if t not in now}
            if refused:
                raise TopicsRefused(refused)
            # another process created these between our listing and our request: with its count, maybe
            # not ours (found by review: the loser of the race went on without a check)
            check_partitions(settings.partitions, await _counts_when_known(admin, raced))
            missing = {t: c for t, c in missing.items() if t not in raced}
            # KRaft propagates new topics to the brokers' metadata asynchronously: wait for it
            for _ in range(100):
                if set(missing) <= set(await admin.list_topics()):
                    break
                await asyncio.sleep(0.1)
        return sorted(missing)
    finally:
        await admin.close()
