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
"""

from __future__ import annotations

import asyncio
from functools import partial

from aiokafka import AIOKafkaProducer

from scheduling.events import Event, partition_for
from streams import telemetry
from streams.settings import Settings


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


class EventProducer:
    """``async with EventProducer(settings) as p: await p.send("jobs.submitted", event)``."""

    def __init__(self, settings: Settings, *, linger_ms: int = 5) -> None:
        self.settings = settings
        self.linger_ms = linger_ms
        self._producer: AIOKafkaProducer | None = None
        self._inflight: set[asyncio.Future[object]] = set()  # sent, not yet answered by the broker
        self.delivered = 0
        self.failed = 0
        self._first_failure: tuple[str, str] | None = None  # (topic, reason)
        self._raised = 0  # failures a DeliveryError has reported

    async def __aenter__(self) -> EventProducer:
        telemetry.ensure_configured(self.settings, "semsched-producer")
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.settings.bootstrap,
            linger_ms=self.linger_ms,
            acks="all",
            enable_idempotence=True,
            max_request_size=max(self.settings.max_message_bytes * 4, 1024 * 1024),
        )
        await self._producer.start()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        if self._producer is not None:
            try:
                await self._producer.stop()  # sends what is buffered and waits for the answers
            finally:
                self._producer = None
            if self._inflight:
                await asyncio.gather(*self._inflight, return_exceptions=True)
        if exc_type is None and self.failed > self._raised:  # not yet reported by a flush or send
            self._raise_failures()

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
        if topic == "jobs.submitted" and headers is None:
            with telemetry.send_span(self.settings.topic(topic), str(getattr(event, "job_id", ""))) as hs:
                await self.send_raw(topic, event.to_bytes(), key=event_key(event), cluster=cluster, headers=hs)
            return
        await self.send_raw(topic, event.to_bytes(), key=event_key(event), cluster=cluster,
                            headers=telemetry.inject() if headers is None else headers)  # fmt: skip

    async def send_raw(self, topic: str, raw: bytes, *, key: bytes | None, cluster: str,
                       headers: list[tuple[str, bytes]] | None = None) -> None:  # fmt: skip
        self._raise_failures()
        name = self.settings.topic(topic)
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
        await self.producer.flush()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
        self._raise_failures()
