"""Publishing events: the one way every producer (replay, agents, worker helpers, tests)
puts a semsched event on a topic, partitioned by cluster.

A submission starts its job's trace here (``send jobs.submitted``, see
``streams/telemetry/spans.py``): its W3C ``traceparent`` goes into the message headers. A
process that has not set telemetry up yet (replay, demo, benches) does so on first use.

**Delivery is checked.** ``send`` returns once the event is buffered; the broker's answer
comes later, on a future aiokafka hands back and a plain ``flush()`` does not look at. A
batch the broker refuses (a record over the topic's ``max.message.bytes``, a partition
without a leader past the retries, …) would then vanish without a word. Every send's future
is kept until it settles: ``flush()`` raises :class:`DeliveryError` when any event failed,
with how many and the first reason; a ``send`` after a failure raises at once rather than
publish past a hole; leaving the ``async with`` raises a failure no ``flush`` or ``send``
has reported yet.

**A broker that stops answering ends the wait.** aiokafka gives up on a batch only when its
partition has no leader; with the only broker gone, the cached metadata still names it, and
``flush`` (or leaving the ``async with``, which flushes) retried for ever: a demo whose broker
died hung, and one Ctrl-C did not stop it (found by the ops review). ``flush`` waits at most
``answer_timeout_s`` (60 s), then raises :class:`DeliveryError` naming the broker; leaving on an
error or an interruption waits at most 5 s before the producer is dropped.

**A topic with another partition count is refused by name.** The first send to each topic
compares its partition count with ``SEMSCHED_PARTITIONS`` (``streams/topics.py``) and raises
:class:`streams.topics.PartitionCountError` on a mismatch: before, a topic with fewer
partitions failed only the clusters that hashed past its end, with aiokafka's bare
"Unrecognized partition", and one with more took events where the worker did not look for them.
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from scheduling.events import Event, partition_for
from streams import telemetry
from streams.kafka_backoff import pace_failed_metadata_updates
from streams.settings import Settings
from streams.topics import check_partitions


def event_key(event: Event) -> bytes:
    for attr in ("job_id", "node_id", "decision_id"):
        v = getattr(event, attr, None)
        if v:
            return str(v).encode()
    return event.event_id.encode()


class DeliveryError(RuntimeError):
    """Events the broker did not take (see the module docstring): ``failed`` of them, the first
    on ``topic`` for ``reason``."""

    def __init__(self, failed: int, topic: str, reason: str) -> None:
        super().__init__(f"{failed} event(s) not delivered; the first to {topic}: {reason}")
        self.failed, self.topic, self.reason = failed, topic, reason


#: the topics whose events the worker reads within ``max_message_bytes`` (streams/admission.py), from producers
#: outside it (its own decisions go through Faust's producer)
PRODUCED_TO_THE_WORKER = frozenset({"jobs.submitted", "nodes.telemetry", "jobs.lifecycle"})


class EventProducer:
    """``async with EventProducer(settings) as p: await p.send("jobs.submitted", event)``."""

    def __init__(self, settings: Settings, *, linger_ms: int = 5, answer_timeout_s: float = 60.0,
                 request_timeout_ms: int = 40_000) -> None:  # fmt: skip
        """``request_timeout_ms``: aiokafka's, how long an event may wait in the producer for a
        partition leader (a broker outage) before it fails, and how long a send waits for room."""
        self.settings = settings
        self.linger_ms = linger_ms
        self.answer_timeout_s = answer_timeout_s
        self.request_timeout_ms = request_timeout_ms
        self._producer: AIOKafkaProducer | None = None
        self._inflight: set[asyncio.Future[object]] = set()  # sent, not yet answered by the broker
        self.delivered = 0
        self.failed = 0
        self._first_failure: tuple[str, str] | None = None  # (topic, reason)
        self._raised = 0  # failures a DeliveryError has reported
        self._checked: set[str] = set()  # topics whose partition count matched the settings

    async def __aenter__(self) -> EventProducer:
        telemetry.ensure_configured(self.settings, "semsched-producer")
        pace_failed_metadata_updates()  # (a producer whose brokers are gone retried without a pause)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.settings.bootstrap,
            linger_ms=self.linger_ms,
            acks="all",
            enable_idempotence=True,
            max_request_size=max(self.settings.max_message_bytes * 4, 1024 * 1024),
            request_timeout_ms=self.request_timeout_ms,
        )
        await self._producer.start()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        if self._producer is not None:
            wait = self.answer_timeout_s if exc_type is None else min(5.0, self.answer_timeout_s)
            producer = self._producer
            try:  # sends what is buffered and waits for the answers, for so long
                await self._answered_within(producer.stop(), wait, raise_=exc_type is None)
            finally:
                self._producer = None
                await _abandon(producer)
        if exc_type is None and self.failed > self._raised:  # not yet reported by a flush or send
            self._raise_failures()

    async def _answered_within(self, work: Any, wait: float, *, raise_: bool = True) -> None:
        """``work`` (a flush, a stop), then the answers to every send, within ``wait`` seconds; past it
        :class:`DeliveryError` (``raise_``) naming the broker, or nothing more (leaving on an error)."""

        async def both() -> None:
            await work
            if self._inflight:
                await asyncio.gather(*self._inflight, return_exceptions=True)

        try:
            await asyncio.wait_for(both(), wait)
        except TimeoutError:
            if raise_:
                raise DeliveryError(max(1, len(self._inflight)), self.settings.bootstrap,
                                    f"the broker did not answer within {wait:g} s (is it running?)") from None  # fmt: skip

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("use EventProducer as an async context manager")
        return self._producer

    async def send(self, topic: str, event: Event, *, cluster: str | None = None,
                   headers: list[tuple[str, bytes]] | None = None) -> None:  # fmt: skip
        """Queue ``event`` on un-prefixed ``topic``; returns once it is buffered. A submission
        starts its job's trace; other events carry ``headers`` (default: the current span's
        trace context, if any)."""
        cluster = cluster or getattr(event, "cluster", "default")
        raw = event.to_bytes()
        if topic in PRODUCED_TO_THE_WORKER and len(raw) > self.settings.max_message_bytes:
            # the broker takes it (its topics allow more) and the worker dead-letters it: say so to the sender now
            # (found by review: send and flush succeeded, and the event turned up in the dead-letter topic; send_raw
            # leaves raw bytes alone, as a producer outside semsched would send them)
            raise ValueError(f"{topic} event of {len(raw):,} bytes is over the worker's {self.settings.max_message_bytes:,}"
                             "-byte limit (SEMSCHED_MAX_MESSAGE_BYTES): it would be dead-lettered, not read")  # fmt: skip
        if topic == "jobs.submitted" and headers is None:
            with telemetry.send_span(self.settings.topic(topic), str(getattr(event, "job_id", ""))) as hs:
                await self.send_raw(topic, raw, key=event_key(event), cluster=cluster, headers=hs)
            return
        await self.send_raw(topic, raw, key=event_key(event), cluster=cluster,
                            headers=telemetry.inject() if headers is None else headers)  # fmt: skip

    async def send_raw(self, topic: str, raw: bytes, *, key: bytes | None, cluster: str,
                       headers: list[tuple[str, bytes]] | None = None) -> None:  # fmt: skip
        self._raise_failures()
        name = self.settings.topic(topic)
        if name not in self._checked:
            check_partitions(self.settings.partitions, {name: len(await self.producer.partitions_for(name))})
            self._checked.add(name)
        answer = await self.producer.send(name, raw, key=key, partition=partition_for(cluster, self.settings.partitions),
                                          headers=headers or None)  # fmt: skip
        self._inflight.add(answer)
        answer.add_done_callback(partial(self._answered, name))

    def _answered(self, topic: str, answer: asyncio.Future[object]) -> None:
        self._inflight.discard(answer)
        error = None if answer.cancelled() else answer.exception()
        if answer.cancelled() or error is not None:
            self.failed += 1
            if self._first_failure is None:
                self._first_failure = (topic, "cancelled" if error is None else f"{type(error).__name__}: {error}")
        else:
            self.delivered += 1

    def _raise_failures(self) -> None:
        if self._first_failure is not None:
            self._raised = self.failed
            raise DeliveryError(self.failed, *self._first_failure)

    async def flush(self) -> None:
        """Send what is buffered and wait for the broker's answer to every event sent so far;
        :class:`DeliveryError` if any was refused."""
        await self._answered_within(self.producer.flush(), self.answer_timeout_s)
        self._raise_failures()


async def _abandon(producer: AIOKafkaProducer) -> None:
    """What a stop cut short leaves: aiokafka's sender and its client's metadata task would go on retrying
    the broker for as long as the event loop runs (found by the review of the change). Nothing when
    the stop finished."""
    sender = getattr(producer, "_sender", None)
    task = getattr(sender, "sender_task", None)
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 2.0)
    accumulator = getattr(producer, "_message_accumulator", None)
    if accumulator is not None:  # its batches fail: its close (the stop's) returns
        with contextlib.suppress(Exception):
            batches = [b for bs in accumulator._batches.values() for b in bs] + list(accumulator._pending_batches)
            futures = [f for b in batches for f in (b.future, b._drain_waiter)]
            accumulator.fail_all(KafkaError("the producer was abandoned: the broker did not answer"))
            for f in futures:  # (counted as failed sends already: not "never retrieved" at exit)
                if f.done() and not f.cancelled():
                    f.exception()
        await asyncio.sleep(0)
    client = getattr(producer, "client", None)
    if client is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 2.0)
