"""Publishing events: the one way every producer (replay, agents, worker helpers, tests)
puts a semsched event on a topic, partitioned by cluster.

A submission starts its job's trace here (``send jobs.submitted``, see
``streams/telemetry/spans.py``): its W3C ``traceparent`` goes into the message headers. A
process that has not set telemetry up yet (replay, demo, benches) does so on first use.
"""

from __future__ import annotations

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


class EventProducer:
    """``async with EventProducer(settings) as p: await p.send("jobs.submitted", event)``."""

    def __init__(self, settings: Settings, *, linger_ms: int = 5) -> None:
        self.settings = settings
        self.linger_ms = linger_ms
        self._producer: AIOKafkaProducer | None = None

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

    async def __aexit__(self, *exc: object) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

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
        await self.producer.send(self.settings.topic(topic), raw, key=key,
                                 partition=partition_for(cluster, self.settings.partitions),
                                 headers=headers or None)  # fmt: skip

    async def flush(self) -> None:
        await self.producer.flush()
