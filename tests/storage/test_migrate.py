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
    for t in TABLES:
        assert tables[t].endswith("event_id"), (t, tables[t])
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
