"""One short replay of real openb pods through the live pipeline, archived in chdb, shared by
the metrics-agreement test and the dashboard-panel test (replayed once per test session).

Two phases on one archive: the worker runs ``best-fit`` for the first pods, then is
restarted with ``fifo-first-fit`` for the next ones (so the archive holds two policies); the
agents fail a share of the jobs half-way (``--fail-rate``), so jobs are re-queued and placed
again; a few malformed messages are dead-lettered. The pods go once the worker knows the whole inventory
(as in ``semsched demo``), so every decision saw every node. At the end the worker and agents are
stopped, the test process drains the topics into the archive (as ``semsched demo`` does) and
keeps the chdb directory open for queries; ``close()`` releases it (chdb allows one open
directory per process, so every user closes it when done).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ops.demo import worker_knows_nodes
from ops.local_stack import LocalStack, free_port
from ops.replay import replay
from ops.traces import get_loader
from storage.client import ArchiveClient, close_client, get_client
from streams.archiver import archive_catch_up
from streams.producer import EventProducer
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS

PHASES = (("best-fit", 10_000_000, 24), ("fifo-first-fit", 10_400_000, 24))  # policy, trace offset, pods
FAIL_RATE = "0.15"
MALFORMED = {b"{not json": "bad-1", b'{"job_id": 5}': "bad-2", b"\xff\xfe": "bad-3"}


@dataclass
class ReplayedArchive:
    dsn: str
    run_dir: Path
    submitted: int
    deadletters: int
    policies: tuple[str, ...]
    first_event: datetime
    last_event: datetime

    @property
    def client(self) -> ArchiveClient:
        return get_client(self.dsn)

    def close(self) -> None:
        close_client(self.dsn)


_CACHE: dict[str, ReplayedArchive] = {}


def _settled(expected: int):  # type: ignore[no-untyped-def]
    # from the worker's tables, not its counters: they survive the restart between phases
    def pred(st: dict[str, Any]) -> bool:
        return st["finished"] + st["rejected"] >= expected and st["pending"] + st["reserved"] + st["running"] == 0

    return pred


async def _publish_malformed(settings: Settings) -> None:
    async with EventProducer(settings) as prod:
        for raw, key in MALFORMED.items():
            await prod.send_raw("jobs.submitted", raw, key=key.encode(), cluster="default")
        await prod.flush()


def replayed_archive(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> ReplayedArchive:
    """The session's replayed archive (replays on first use)."""
    if "archive" in _CACHE:
        return _CACHE["archive"]
    run_dir = tmp_path_factory.mktemp("metrics-archive")
    settings = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.",
                        state_dir=run_dir, web_port=free_port(), partitions=4, step_s=0.5,
                        confirm_timeout_s=20, policy=PHASES[0][0],
                        max_retries=12)  # 0.15^13: no job is rejected by bad luck  # fmt: skip
    stack = LocalStack(settings, run_dir)
    submitted = 0
    try:
        asyncio.run(ensure_topics(settings))
        stack.start_agents(*FAST_AGENTS, "--fail-rate", FAIL_RATE, "--seed", "7")
        for i, (policy, offset, pods) in enumerate(PHASES):
            s = settings.model_copy(update={"policy": policy})
            stack.start_worker("--loglevel", "info", settings=s)
            loader = get_loader("openb", start_offset=offset, limit=pods)
            stats = asyncio.run(replay(loader, s, speed=2000, limit=pods, strict=True, progress=False, max_gap_s=0.3,
                                       create_topics=False, inventory_published=lambda n: worker_knows_nodes(stack, n)))  # fmt: skip
            submitted += stats.jobs
            if i == len(PHASES) - 1:
                asyncio.run(_publish_malformed(s))
            stack.wait(_settled(submitted), timeout=240, what=f"phase {policy}: {submitted} jobs to settle")
            stack.children.pop("worker").stop()
        stack.children.pop("agents").stop()
        asyncio.run(archive_catch_up(settings))
    except BaseException:
        print(stack.log_tails(40))
        raise
    finally:
        stack.stop()
    client = get_client(settings.clickhouse_dsn)
    _, [(first, last)] = client.query_rows("SELECT min(toUnixTimestamp64Milli(event_time)), "
                                           "max(toUnixTimestamp64Milli(event_time)) FROM jobs_lifecycle FINAL")
    _, [(sub_first,)] = client.query_rows("SELECT min(toUnixTimestamp64Milli(event_time)) FROM jobs_submitted FINAL")
    archive = ReplayedArchive(
        dsn=settings.clickhouse_dsn, run_dir=run_dir, submitted=submitted, deadletters=len(MALFORMED),
        policies=tuple(p for p, _, _ in PHASES),
        first_event=datetime.fromtimestamp(min(int(first), int(sub_first)) / 1000, UTC),
        last_event=datetime.fromtimestamp(int(last) / 1000, UTC),
    )  # fmt: skip
    _CACHE["archive"] = archive
    return archive
