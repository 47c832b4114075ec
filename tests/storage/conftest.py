"""chdb fixtures for the storage tests.

chdb 3.7 keeps ONE open connection per process: opening a second data directory while one
is open raises ``RuntimeError``; closing it first works. So every test gets its own tmp
directory and the fixture closes the client at teardown (``storage.client.close_client``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.client import ArchiveClient, close_client, get_client
from storage.migrate import migrate


@pytest.fixture
def chdb_dsn(tmp_path: Path) -> Iterator[str]:
    dsn = f"chdb://{tmp_path / 'chdb'}"
    yield dsn
    close_client(dsn)


@pytest.fixture
def client(chdb_dsn: str) -> ArchiveClient:
    c = get_client(chdb_dsn)
    migrate(c)
    return c
