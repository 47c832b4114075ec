"""The worker's ``/status`` (streams/web.py) says when its counts are partial: while the tables recover or
a restore runs, and until the loop has caught up and schedules (found by a chaos run: a restarted
worker's status showed half its tables, fin=1000 of ~1,450 done, and nothing said so)."""

from __future__ import annotations

from scheduling.events import JobSubmitted, NodeTelemetry, partition_for
from streams.archiver import Archiver
from streams.settings import Settings
from streams.state import on_submitted
from streams.web import status
from tests.streams.loop_helpers import T0, stood_in_worker


async def test_status_says_while_the_worker_recovers_and_once_it_schedules() -> None:
    w, _ = stood_in_worker()
    loop = w.loop  # type: ignore[attr-defined]
    w.restoring = 1  # an input-log restore under way (streams/log_restore.py)
    await loop.tick()
    assert (status(w)["recovering"], status(w)["scheduling"]) == (True, False)
    w.restoring = 0
    await loop.tick()
    assert (status(w)["recovering"], status(w)["scheduling"]) == (False, True)
    w.app.tables.recovery.completed.clear()  # Faust's table recovery after a rebalance
    assert status(w)["recovering"] is True


def test_status_counts_the_jobs_and_nodes_of_the_partitions_held_now() -> None:
    """A partition that moved to another worker leaves its keys in this one's tables, never updated since:
    counted, two workers' counts stayed above zero after every job had finished (found by a chaos run)."""
    w, assigned = stood_in_worker()
    here, gone = "c1", next(f"c{i}" for i in range(2, 50) if partition_for(f"c{i}", 4) != partition_for("c1", 4))
    for cluster in (here, gone):
        job = JobSubmitted(job_id=f"j-{cluster}", event_id=f"ev-{cluster}", event_time=T0, cluster=cluster,
                           cpu_milli=1000, memory_mib=1024)  # fmt: skip
        w.apply(on_submitted(job, None, 0.0), partition=partition_for(cluster, 4))
        w.nodes.data[f"n-{cluster}"] = NodeTelemetry(node_id=f"n-{cluster}", cluster=cluster, event_time=T0,
                                                     cpu_milli=1000, memory_mib=1024).model_dump(mode="json")  # fmt: skip
    assert (status(w)["pending"], status(w)["nodes"]) == (2, 2)
    held = {tp for tp in assigned if tp.partition != partition_for(gone, 4)}
    w.app.consumer.assignment = lambda: held  # type: ignore[method-assign]
    assert (status(w)["pending"], status(w)["nodes"]) == (1, 1)
    # and /nodes/{id}/ answers only for a node this worker holds (found by review: the other's, frozen)
    import asyncio

    view = w.app.web.views["/nodes/{node_id}/"]
    gone_answer = asyncio.run(view.get(None, f"n-{gone}"))
    assert gone_answer.status == 404 and b"another worker holds now" in gone_answer.body
    assert asyncio.run(view.get(None, f"n-{here}")).status == 200


class PostedSQL:
    """What ``/sql``'s view reads of a request."""

    def __init__(self, sql: str, query: dict[str, str]) -> None:
        self.headers: dict[str, str] = {}
        self.query = query
        self.sql = sql

    async def text(self) -> str:
        return self.sql


async def test_sql_answers_503_while_the_archiver_starts_and_a_flush_then_does_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A restarted worker's ``/sql?flush=1`` before its archiver had opened the archive failed an assertion
    (HTTP 500 and a traceback; found by a chaos run)."""
    archiver = Archiver(Settings(state_dir=tmp_path))
    assert not archiver.started()
    assert await archiver.flush_all(retry_for_s=1.0) is False
    w, _ = stood_in_worker()
    w.archiver = archiver  # type: ignore[attr-defined]
    answer = await w.app.web.views["/sql"].post(PostedSQL("SELECT 1", {"flush": "1"}))
    assert answer.status == 503 and b"starting" in answer.body


async def test_sql_answers_within_the_workers_limits_and_encodes_off_the_event_loop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Found by review: an analyst's query ran with no limit in the worker (2 million rows took 19 s to run,
    then 14 s of JSON on the event loop, longer than the Kafka session). Past the worker's limits the
    query stops with ClickHouse's reason; the answer is encoded in the query's thread."""
    import json

    from storage.client import close_client, get_client
    from storage.migrate import migrate
    from storage.writer import ArchiveWriter

    dsn = f"chdb://{tmp_path / 'chdb'}"
    archiver = Archiver(Settings(state_dir=tmp_path))
    archiver.client = get_client(dsn)
    migrate(archiver.client)
    archiver._writer = ArchiveWriter(archiver.client)  # (opened: what start() does before it consumes)
    w, _ = stood_in_worker()
    w.archiver = archiver  # type: ignore[attr-defined]
    try:
        view = w.app.web.views["/sql"]
        big = await view.post(PostedSQL("SELECT number FROM numbers(1000000)", {}))
        assert big.status == 400 and b"Limit for result exceeded" in big.body
        ok = await view.post(PostedSQL("SELECT number, toString(number) AS s FROM numbers(3)", {}))
        assert ok.status == 200 and json.loads(ok.body)["rows"] == [[0, "0"], [1, "1"], [2, "2"]]
        assert ok.content_type == "application/json"
        whole = await view.post(PostedSQL("SELECT number FROM numbers(150000)", {"max_rows": "0", "timeout_s": "30"}))
        assert whole.status == 200 and len(json.loads(whole.body)["rows"]) == 150_000  # a whole read (train, explain)
        nan = await view.post(PostedSQL("SELECT toFloat64(nan) AS x", {}))  # kept for the CLI's CSV and tables
        assert nan.status == 200 and str(json.loads(nan.body)["rows"][0][0]) == "nan"
        bad = await view.post(PostedSQL("SELECT 1", {"timeout_s": "nan"}))
        assert bad.status == 400 and b"timeout_s takes seconds" in bad.body
    finally:
        close_client(dsn)
