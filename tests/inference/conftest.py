"""Puts this folder (``inference_helpers``) on ``sys.path``; ``archive``: the suite's
``chdb_archive`` (tests/conftest.py), migrated."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from storage.client import ArchiveClient  # noqa: E402
from storage.migrate import migrate  # noqa: E402


@pytest.fixture
def archive(chdb_archive: ArchiveClient) -> ArchiveClient:
    migrate(chdb_archive)
    return chdb_archive
