"""What a (re)started agents process reads back from the topics before it takes commands.

The agents keep their state in memory: the nodes (learned from inventory telemetry), the
decisions they executed, the runs in progress. Their consumer group commits its offsets, so a
restarted process would not see the inventory again and would refuse every placement ("unknown
node"), and the jobs its predecessor was running would stay "running" for ever: nothing else
reports their end.

:func:`recover` reads ``jobs.lifecycle`` from the beginning, and ``nodes.telemetry`` from the offset the
agents' consumer group committed there (from the beginning when it committed none), up to their ends
at start (no consumer group: nothing is committed) and returns:

- every node's capacity: its first inventory event, as the agents keep it, or, once retention
  (168 h) has removed that, the latest report of its agent (the agents report every node at
  least every 10 s); a node whose agent last reported it unhealthy (isolated by a command) stays so;
- every decision an agent already reported on (started, finished, failed, preempted) or the
  worker gave up on (``timed_out``: it re-queued the job), so a redelivered command, or one
  still in the backlog of agents that were down longer than the confirmation timeout, is not
  executed;
- the runs that were started and never ended, unless the worker has moved the job on to a later
  attempt meanwhile: the process that ran them is gone, so the agents report each one
  ``preempted`` with that reason (:data:`LOST_REASON`), and the worker decides the job again
  without charging its retry budget (the job did not fail: its agent did, as when the worker
  moves jobs off a lost node).

Why the telemetry read-back may start at the committed offset: the agents commit a ``nodes.telemetry``
offset only once every node they knew after reading up to it was reported after it (a full round of
reports, delivered: ``ops/agents/simulated.py``), and a report sent after that read is written past
that offset. So each node a predecessor knew has a report there, with its capacity and its health.
Only an offset committed with :data:`FULL_ROUND_MARK` is taken so (found by review: agents before the
mark committed telemetry as far as they had read, and the first upgraded ones knew no node).
Before (until 2026-12-04) the whole topic was read back: with 1,213 nodes reporting every 10 s that is
73 million records a week, about 14 minutes at the ~86,000 a second measured here, during which no
command was carried out and no node reported.

One agents process plays every node (``semsched agents``): at its start nothing else runs them.
Everything is keyed by cluster too: job, node and decision names are unique only within a cluster.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from ops.agents.single_instance import agents_group
from scheduling.events import AGENT_RESTART_LOST_REASON, JobLifecycle, NodeTelemetry, decode
from streams.offset_starts import committed_offsets
from streams.settings import Settings

LOST_REASON = AGENT_RESTART_LOST_REASON
#: the metadata of a ``nodes.telemetry`` offset the agents committed past a full round of reports; an offset
#: committed otherwise (by agents before this mark, by an operator's reset of the group) says nothing of the
#: nodes before it, and the telemetry is read back from the beginning
FULL_ROUND_MARK = "semsched-agents: every node known before this offset is reported past it"
COORDINATOR_TRIES = 3  # asking for the group's committed offsets, a second apart

log = logging.getLogger("semsched.agents")
#: the lifecycle states after which a decision is not to be executed (again): the agents' own
#: reports, and the worker's ``timed_out`` (it gave the placement up and re-queued the job)
DONE_WITH = frozenset({"started", "finished", "failed", "preempted", "timed_out"})


Key = tuple[str, str]  # (cluster, a node, job or decision id): names are unique only within a cluster


@dataclass
class Recovered:
    inventory: dict[Key, NodeTelemetry] = field(default_factory=dict)  # the nodes' capacities (module docstring)
    reported: set[Key] = field(default_factory=set)  # decisions not to execute
    lost: list[JobLifecycle] = field(default_factory=list)  # each lost run's 'started' report
    telemetry_read: int = 0  # telemetry records read back


async def _summarised(settings: Settings, telemetry: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The agents' committed telemetry offsets; none (read it all back) when the broker cannot say: a new
    broker has no coordinator for the group yet."""
    for attempt in range(COORDINATOR_TRIES):
        try:
            return await committed_offsets(settings, agents_group(settings), telemetry, marked=FULL_ROUND_MARK)
        except KafkaError as e:
            if attempt == COORDINATOR_TRIES - 1:
                log.warning("agents: the group's telemetry offsets are unknown (%s): reading the telemetry back "
                            "from the beginning", e)  # fmt: skip
            else:
                await asyncio.sleep(1.0)
    return {}


async def recover(settings: Settings) -> Recovered:
    """The topics are created first when missing (idempotent): agents may start before the worker
    or the replay has created them."""
    from streams.topics import ensure_topics

    await ensure_topics(settings)
    telemetry = [TopicPartition(settings.topic("nodes.telemetry"), p) for p in range(settings.partitions)]
    summarised = await _summarised(settings, telemetry)
    out = Recovered()
    started: dict[Key, JobLifecycle] = {}
    ended: set[Key] = set()
    attempts: dict[Key, int] = {}  # job -> the latest attempt any lifecycle event names
    reported_by_agent: dict[Key, NodeTelemetry] = {}  # node -> its agent's latest report
    # auto_offset_reset="earliest", and the seek before any other await: the consumer's own reset of the
    # partitions it is assigned (aiokafka's default "latest"), still in flight when a later seek to their
    # beginning came, set every position to the end, and the read-back read nothing (no node, no lost run:
    # a CI failure, found by review)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest",
                                max_partition_fetch_bytes=max(settings.max_message_bytes * 4, 1024 * 1024))  # fmt: skip
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic(t), p) for t in ("nodes.telemetry", "jobs.lifecycle")
               for p in range(settings.partitions)]  # fmt: skip
        firsts = await consumer.beginning_offsets(tps)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        for tp, offset in summarised.items():  # the telemetry's summarised offsets (retention may have deleted past one)
            if offset > firsts[tp]:
                consumer.seek(tp, offset)
        ends = await consumer.end_offsets(tps)
        left = {tp for tp in tps if ends[tp] > max(firsts[tp], summarised.get(tp, 0))}
        while left:
            batch = await consumer.getmany(*left, timeout_ms=500, max_records=5000)
            for tp, msgs in batch.items():
                topic = tp.topic.removeprefix(settings.topic_prefix)
                for m in msgs:
                    if m.offset >= ends[tp]:
                        break
                    out.telemetry_read += topic == "nodes.telemetry"
                    try:
                        ev = decode(topic, m.value) if m.value is not None else None
                    except ValueError:
                        continue  # the worker dead-letters it
                    if isinstance(ev, NodeTelemetry) and ev.source == "inventory":
                        out.inventory.setdefault((ev.cluster, ev.node_id), ev)
                    elif isinstance(ev, NodeTelemetry) and ev.source == "agent":
                        reported_by_agent[(ev.cluster, ev.node_id)] = ev
                    elif isinstance(ev, JobLifecycle):
                        job = (ev.cluster, ev.job_id)
                        attempts[job] = max(attempts.get(job, 0), ev.attempt)
                        if ev.decision_id and ev.state in DONE_WITH:
                            decision = (ev.cluster, ev.decision_id)
                            out.reported.add(decision)
                            if ev.state == "started":
                                started.setdefault(decision, ev)
                            elif ev.state != "timed_out":  # (a start that raced it: the worker keeps it running)
                                ended.add(decision)
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
    finally:
        await consumer.stop()
    for node, ev in reported_by_agent.items():
        known = out.inventory.setdefault(node, ev)  # (its inventory report is gone: retention)
        if not ev.healthy and known.healthy:  # isolated by a command: the agents' reports say so, the inventory not
            out.inventory[node] = known.model_copy(update={"healthy": False})
    out.lost = [ev for d, ev in started.items()
                if d not in ended and ev.attempt >= attempts[(ev.cluster, ev.job_id)]]  # fmt: skip
    return out
