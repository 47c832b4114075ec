"""What a (re)started agents process reads back from the topics before it takes commands.

The agents keep their state in memory: the nodes (learned from inventory telemetry), the
decisions they executed, the runs in progress. Their consumer group commits its offsets, so a
restarted process would not see the inventory again and would refuse every placement ("unknown
node"), and the jobs its predecessor was running would stay "running" for ever: nothing else
reports their end.

:func:`recover` reads ``nodes.telemetry`` and ``jobs.lifecycle`` from the beginning up to their
ends at start (no consumer group: nothing is committed) and returns:

- the inventory of every node (its first inventory event, as the agents keep it);
- every decision an agent already reported on (started, finished, failed, preempted), so a
  redelivered command is not executed twice;
- the runs that were started and never ended: the process that ran them is gone, so the
  agents report each one ``failed`` with that reason (:data:`LOST_REASON`), and the worker
  decides the job again (its retry budget counts it).

One agents process plays every node (``semsched agents``): at its start nothing else runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from scheduling.events import JobLifecycle, NodeTelemetry, decode
from streams.settings import Settings

LOST_REASON = "agent restarted: the run in progress was lost"
AGENT_STATES = frozenset({"started", "finished", "failed", "preempted"})


@dataclass
class Recovered:
    inventory: dict[str, NodeTelemetry] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)  # decision ids an agent reported on
    lost: list[JobLifecycle] = field(default_factory=list)  # each lost run's 'started' report


async def recover(settings: Settings) -> Recovered:
    """The topics are created first when missing (idempotent): agents may start before the worker
    or the replay has created them."""
    from streams.topics import ensure_topics

    await ensure_topics(settings)
    out = Recovered()
    started: dict[str, JobLifecycle] = {}
    ended: set[str] = set()
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None, enable_auto_commit=False,
                                max_partition_fetch_bytes=max(settings.max_message_bytes * 4, 1024 * 1024))  # fmt: skip
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic(t), p) for t in ("nodes.telemetry", "jobs.lifecycle")
               for p in range(settings.partitions)]  # fmt: skip
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        left = {tp for tp in tps if ends[tp] > 0}
        while left:
            batch = await consumer.getmany(*left, timeout_ms=500, max_records=5000)
            for tp, msgs in batch.items():
                topic = tp.topic.removeprefix(settings.topic_prefix)
                for m in msgs:
                    if m.offset >= ends[tp]:
                        break
                    try:
                        ev = decode(topic, m.value) if m.value is not None else None
                    except ValueError:
                        continue  # the worker dead-letters it
                    if isinstance(ev, NodeTelemetry) and ev.source == "inventory":
                        out.inventory.setdefault(ev.node_id, ev)
                    elif isinstance(ev, JobLifecycle) and ev.decision_id and ev.state in AGENT_STATES:
                        out.reported.add(ev.decision_id)
                        if ev.state == "started":
                            started.setdefault(ev.decision_id, ev)
                        else:
                            ended.add(ev.decision_id)
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
    finally:
        await consumer.stop()
    out.lost = [ev for d, ev in started.items() if d not in ended]
    return out
