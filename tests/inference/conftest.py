"""Puts this folder (``inference_helpers``) on ``sys.path``; ``archive``: a migrated chdb
archive per test (chdb allows one open data directory per process: closed at teardown)."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from storage.client import ArchiveClient, close_client, get_client  # noqa: E402
from storage.migrate import migrate  # noqa: E402


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[ArchiveClient]:
    dsn = f"chdb://{tmp_path / 'chdb'}"
    client = get_client(dsn)
    migrate(client)
    yield client
    close_client(dsn)
