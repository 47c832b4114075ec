"""The archiver's final drain (``Archiver.run_until_caught_up``, the demo's last step) with the
consumer stood in: the broker answers the first fetch late, as on a loaded machine. The drain
counted three empty polls before that answer as caught up and ended with nothing read (found by
the archive review). The real broker runs in tests/streams/test_archiver.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition

from scheduling.events import JobSubmitted, partition_for
from storage.client import ArchiveClient
from storage.migrate import migrate
from storage.writer import ArchiveWriter
from streams.archiver import Archiver
from streams.settings import Settings


class LateBroker:
    """A consumer whose first fetch is answered after ``late`` polls: no records and no end known
    until then, then every record at once."""

    def __init__(self, settings: Settings, late: int) -> None:
        part = partition_for("c1", settings.partitions)
        self.tp = TopicPartition(settings.topic("jobs.submitted"), part)
        self.records = [SimpleNamespace(offset=i, value=JobSubmitted(job_id=f"j{i}", cluster="c1").to_bytes(),
                                        timestamp=None, headers=()) for i in range(5)]  # fmt: skip
        self.late, self.polls, self.read = late, 0, 0

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        self.polls += 1
        if self.polls <= self.late or self.read:
            return {}
        self.read = len(self.records)
        return {self.tp: self.records}

    def assignment(self) -> set[TopicPartition]:
        return {self.tp}

    def highwater(self, tp: TopicPartition) -> int | None:
        return None if self.polls <= self.late else len(self.records)

    async def position(self, tp: TopicPartition) -> int:
        return self.read

    async def commit(self, offsets: Any) -> None:
        pass


def test_the_drain_waits_for_the_brokers_first_answer(chdb_archive: ArchiveClient, tmp_path: Path) -> None:
    settings = Settings(bootstrap="127.0.0.1:1", topic_prefix="drain.", state_dir=tmp_path, archive_flush_s=0.05)
    arch = Archiver(settings, chdb_archive, poll_ms=1)
    broker = LateBroker(settings, late=6)
    migrate(chdb_archive)  # (start() would)
    arch._consumer, arch._writer = broker, ArchiveWriter(chdb_archive)  # type: ignore[assignment]
    assert asyncio.run(arch.run_until_caught_up()) == 5
    assert broker.polls > 6
