"""Fixtures shared by the whole suite: the real Kafka broker, once per session
(tests/conftest_kafka.py), and ``chdb_archive``, an embedded archive per test.

chdb is imported first, before any test module imports torch: with torch's native runtime
loaded first, a failing chdb query hangs or crashes the process (see inference/__init__.py).
"""

from collections.abc import Iterator
from pathlib import Path

import chdb  # noqa: F401  (load order; see the docstring)
import pytest

from storage.client import ArchiveClient, close_client, get_client

pytest_plugins = ["tests.conftest_kafka"]


@pytest.fixture
def chdb_archive(tmp_path: Path) -> Iterator[ArchiveClient]:
    """An embedded chdb archive of the test's own, not migrated (an archiver migrates it when it
    starts); closed at teardown, since chdb allows one open data directory per process."""
    dsn = f"chdb://{tmp_path / 'chdb'}"
    yield get_client(dsn)
    close_client(dsn)


#: the fixtures that give a test a real service: the session's broker, a worker and agents on it, a
#: tritonserver, a chdb archive. A test that uses one is marked ``integration`` (``pytest -m integration``
#: runs them), also outside tests/integration/ (found by review: 3 of that directory's files and most tests
#: elsewhere that talk to the broker or tritonserver were left out of ``-m integration``).
REAL_SERVICES = frozenset({"kafka_broker", "kafka_bootstrap", "make_stack", "served", "chdb_archive", "chdb_dsn"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_SERVICES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
