"""``bench archiver`` against the real broker and chdb: with either fetch setting the archiver
writes exactly the openb pods sent at a steady rate, and its thread's CPU is measured. (The
CPU is printed by the benchmark, never compared here.)"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from ops.bench.archiver import SETUPS, measure
from ops.bench.pipeline import unique_submissions
from ops.traces.registry import get_loader
from storage.client import ArchiveClient
from streams.settings import Settings
from streams.topics import ensure_topics

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("setup", list(SETUPS))
def test_archives_exactly_what_was_sent_and_measures_its_thread(kafka_broker: Any, chdb_archive: ArchiveClient,
                                                                 tmp_path: Path, setup: str) -> None:  # fmt: skip
    settings = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"ba{uuid.uuid4().hex[:8]}.", partitions=2,
                        state_dir=tmp_path, archive_flush_s=0.2)  # fmt: skip
    asyncio.run(ensure_topics(settings))
    pods = [e.model_copy(update={"job_id": f"t-{e.job_id}"}) for e in unique_submissions(get_loader("openb").load_jobs(), 150)]
    r = measure(settings, pods, rate=300.0, fetch_min_bytes=SETUPS[setup], client=chdb_archive, prefix="t-",
                timeout_s=120)  # fmt: skip
    assert r["events"] == r["archived"] == r["in_archive"] == 150
    _, rows = chdb_archive.query_rows("SELECT count(), uniqExact(job_id) FROM jobs_submitted FINAL")
    assert [tuple(int(v) for v in r) for r in rows] == [(150, 150)]
    with pytest.raises(ValueError, match="must start with"):  # a run whose pods the count would miss
        measure(settings, pods, rate=300.0, fetch_min_bytes=SETUPS[setup], client=chdb_archive, prefix="x-")
