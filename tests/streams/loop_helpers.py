"""The real worker app and scheduling loop with the broker stood in (tests of ``streams/loop.py``
that drive ``loop.tick()`` by hand): publishing goes to a function of the test's, the tables
write no changelog, every partition is assigned and recovered, and nothing is left to replay."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from scheduling.events import NodeTelemetry, partition_for
from streams.app import Worker, create_app
from streams.settings import Settings

T0 = datetime(2026, 3, 1, tzinfo=UTC)
C1 = partition_for("c1", 4)  # cluster "c1"'s partition of the 4


def c1_node(node_id: str, cpu_milli: int = 8000, memory_mib: int = 16384, num_gpu: int = 0) -> dict[str, Any]:
    """A node of cluster "c1" as the worker's node table holds it (``w.nodes.data[node_id] = …``); its GPUs A100s."""
    return NodeTelemetry(node_id=node_id, cluster="c1", event_time=T0, cpu_milli=cpu_milli, memory_mib=memory_mib,
                         num_gpu=num_gpu, gpu_model="A100" if num_gpu else None).model_dump(mode="json")  # fmt: skip

Publish = Callable[[str, Any, bytes, int, Any], Awaitable[Any]]
_STATE = tempfile.TemporaryDirectory(prefix="semsched-stood-in-")  # each worker's state dir in it; gone at exit


async def delivered(topic: str, key: Any, value: bytes, partition: int, headers: Any = None) -> Any:
    """A publish the broker acknowledges at once."""
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


def stood_in_worker(publish: Publish = delivered, **settings: Any) -> tuple[Worker, set[TopicPartition]]:
    """A worker whose loop can ``tick()`` without a broker, and the partitions it owns (call in a running loop)."""
    s = Settings(bootstrap="127.0.0.1:1", topic_prefix=f"u{uuid.uuid4().hex[:6]}.", web_port=0,
                 state_dir=Path(tempfile.mkdtemp(dir=_STATE.name)), **settings)  # fmt: skip
    w = create_app(s)
    loop = w.loop  # type: ignore[attr-defined]
    w.publish = publish  # type: ignore[method-assign]
    for table in (w.pending, w.running, w.done, w.forgotten):
        table.send_changelog = lambda *a, **k: None
    assigned = {TopicPartition(s.topic(t), p) for t in ("decisions", "jobs.lifecycle") for p in range(4)}
    w.app.consumer.assignment = lambda: assigned  # type: ignore[method-assign]
    w.app.tables.recovery.completed.set()

    async def nothing_to_replay(partitions: Any) -> dict[int, int]:
        return {}

    loop.catchup._replay_targets = loop.lifecycle_catchup._replay_targets = nothing_to_replay
    return w, assigned
