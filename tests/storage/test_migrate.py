from __future__ import annotations

from pathlib import Path

import pytest

from storage.client import ArchiveClient, close_client, get_client
from storage.migrate import MigrationError, load_migrations, migrate
from storage.rows import TABLES


def _tables(client: ArchiveClient) -> dict[str, str]:
    _, rows = client.query_rows(
        "SELECT name, sorting_key FROM system.tables WHERE database = currentDatabase()"
    )
    return {r[0]: r[1] for r in rows}


def test_migrate_applies_every_version_once(chdb_dsn: str) -> None:
    c = get_client(chdb_dsn)
    versions = [m.version for m in load_migrations()]
    assert migrate(c) == versions
    assert migrate(c) == []
    assert migrate(c) == []
    tables = _tables(c)
    copies = {"jobs_submitted", "nodes_telemetry", "jobs_lifecycle"}  # (each copy of an event a row: 0021)
    for t in TABLES:  # (decisions: one row per record, the same decision id re-decided too: 0017)
        want = "kafka_offset" if t == "decisions" or t in copies else "event_id"
        assert tables[t].endswith(want), (t, tables[t])
    _, [(n,)] = c.query_rows("SELECT count() FROM schema_migrations FINAL")
    assert n == sum(len(m.statements) for m in load_migrations())


def test_migrations_survive_reopen(chdb_dsn: str) -> None:
    c = get_client(chdb_dsn)
    migrate(c)
    close_client(chdb_dsn)
    c = get_client(chdb_dsn)
    assert migrate(c) == []
    assert set(TABLES) <= set(_tables(c))


def test_new_version_and_edited_statement(chdb_dsn: str, tmp_path: Path) -> None:
    d = tmp_path / "mig"
    d.mkdir()
    (d / "0001_a.sql").write_text("CREATE TABLE IF NOT EXISTS a (x UInt8) ENGINE = Memory;\n")
    c = get_client(chdb_dsn)
    assert migrate(c, d) == [1]
    (d / "0002_b.sql").write_text(
        "-- two statements\nCREATE TABLE b (x UInt8) ENGINE = Memory;\nINSERT INTO b VALUES (7);\n"
    )
    assert migrate(c, d) == [2]
    assert migrate(c, d) == []
    _, rows = c.query_rows("SELECT x FROM b")
    assert rows == [(7,)]  # the INSERT ran exactly once
    (d / "0001_a.sql").write_text("CREATE TABLE IF NOT EXISTS a (x UInt16) ENGINE = Memory;\n")
    with pytest.raises(MigrationError):
        migrate(c, d)


def test_two_chdb_paths_in_one_process(tmp_path: Path) -> None:
    """chdb: one open data directory per process; close, then another opens fine."""
    a, b = f"chdb://{tmp_path / 'a'}", f"chdb://{tmp_path / 'b'}"
    try:
        ca = get_client(a)
        assert get_client(a) is ca
        with pytest.raises(RuntimeError, match="one data directory"):
            get_client(b)
        close_client(a)
        cb = get_client(b)
        _, rows = cb.query_rows("SELECT 1 AS x")
        assert rows == [(1,)]
    finally:
        close_client(a)
        close_client(b)


def test_every_statement_can_run_again(chdb_dsn: str) -> None:
    """A process that dies between a statement and its record runs it again on the next start:
    0007 dropped a constraint without IF EXISTS, so an archive stopped right after the drop could
    never be migrated again, and the worker never started (found by the archive review)."""
    c = get_client(chdb_dsn)
    migrate(c)
    for m in load_migrations():
        for stmt in m.statements:
            c.command(stmt)
            c.command(stmt)  # at once again, as after a death before its record: raises if it cannot be


def test_an_archive_that_recorded_0007s_first_text_migrates(chdb_dsn: str) -> None:
    from storage.migrate import REWRITTEN

    c = get_client(chdb_dsn)
    migrate(c)
    c.command("ALTER TABLE schema_migrations DELETE WHERE version = 7 SETTINGS mutations_sync = 1")
    for (version, statement), old in REWRITTEN.items():  # as an archive migrated before the rewrite holds them
        c.command(f"INSERT INTO schema_migrations VALUES ({version}, 'decisions_unschedulable', {statement}, "
                  f"'{old}', now64(3))")  # fmt: skip
    assert migrate(c) == []


def test_an_archive_of_0016_keeps_its_decision_records_through_0017(chdb_dsn: str, tmp_path: Path) -> None:
    """0017 moves the decisions into a table keyed by the record's offset: the rows an archive holds
    come along, both records of a re-decided attempt among them while not merged yet."""
    import shutil
    from datetime import UTC, datetime

    from scheduling.events import DecisionRecord
    from storage.migrate import MIGRATIONS_DIR
    from storage.writer import ArchiveWriter

    old = tmp_path / "upto16"
    old.mkdir()
    for f in sorted(MIGRATIONS_DIR.glob("*.sql")):
        if int(f.name[:4]) <= 16:
            shutil.copy(f, old / f.name)
    c = get_client(chdb_dsn)
    assert migrate(c, old)[-1] == 16
    rec = DecisionRecord(event_id="d", decision_id="d", event_time=datetime(2026, 3, 1, tzinfo=UTC), job_id="j",
                         outcome="placed", node_id="n1", policy="best-fit", latency_ms=1.0)  # fmt: skip
    ArchiveWriter(c).write("decisions", [rec], [(0, 4)])
    ArchiveWriter(c).write("decisions", [rec.model_copy(update={"node_id": "n2"})], [(0, 7)])
    assert migrate(c)[0] == 17
    assert c.query_rows("SELECT node_id FROM decisions_applied")[1] == [("n1",)]
    assert sorted(c.query_rows("SELECT node_id, kafka_offset FROM decisions")[1]) == [("n1", 4), ("n2", 7)]
    assert "decisions_0004" not in _tables(c) and "decisions_by_record" not in _tables(c)
