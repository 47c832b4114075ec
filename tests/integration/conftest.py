"""A real stack per test: the session's Kafka broker, a worker (Faust + chdb archive) and
simulated agents as subprocesses (ops.local_stack), on topics and a state directory of
their own; stopped by PID at teardown."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from ops.local_stack import LocalStack, free_port
from scheduling.events import Event
from streams.producer import EventProducer
from streams.settings import Settings
from tests.conftest_kafka import read_topic

FAST_AGENTS = ("--speed", "1000", "--max-duration", "2000", "--telemetry", "1")
SNAPSHOT_MISMATCH = "differs from one built from the tables"  # streams/snapshot_cache.py's error line

TOPIC_OF = {"job_submitted": "jobs.submitted", "node_telemetry": "nodes.telemetry", "job_lifecycle": "jobs.lifecycle"}


def publish(settings: Settings, events: Iterable[Event], *, pause: float = 0.0) -> None:
    """Publish submissions and telemetry as a producer would (``EventProducer``), each stamped
    with the moment it is sent, ``pause`` seconds apart."""

    async def run() -> None:
        async with EventProducer(settings) as prod:
            for ev in events:
                await prod.send(TOPIC_OF[ev.kind], ev.model_copy(update={"event_time": datetime.now(UTC)}))
                if pause:
                    await asyncio.sleep(pause)
            await prod.flush()

    asyncio.run(run())


def topic_records(settings: Settings, topic: str) -> dict[str, tuple[int, int]]:
    """Every record on un-prefixed ``topic`` by key: ``{key: (partition, offset)}`` (the last one of a key)."""
    records = read_topic(settings.bootstrap, settings.topic(topic), settings.partitions)
    return {(m.key or b"").decode(): (m.partition, m.offset) for m in records}


@pytest.fixture
def make_stack(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LocalStack]]:
    made: list[LocalStack] = []

    def make(**overrides: Any) -> LocalStack:
        run_dir = tmp_path_factory.mktemp("stack")
        settings = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.",
                            state_dir=run_dir, web_port=free_port(), partitions=4,
                            **{"step_s": 0.5, "confirm_timeout_s": 20, "snapshot_verify_s": 0, **overrides})  # fmt: skip
        stack = LocalStack(settings, run_dir)
        made.append(stack)
        return stack

    yield make
    for stack in made:
        stack.stop()
    # every step's kept cluster snapshot was checked against one built from the tables (snapshot_verify_s=0):
    # any difference is in a worker's log (every worker of the test, also those killed or restarted)
    mismatched = [f"{log.name}: {line.strip()}" for stack in made for log in sorted(stack.run_dir.glob("*.log"))
                  for line in log.read_text(errors="replace").splitlines() if SNAPSHOT_MISMATCH in line]  # fmt: skip
    assert not mismatched, "kept snapshots differed from rebuilt ones:\n" + "\n".join(mismatched[:10])
