"""One real tritonserver (PyTriton) for the serving tests, started once per session.

The served model directory is ``<tmp>/models/latest`` → ``v1`` (a tiny untrained scorer);
tests that publish another version go through :func:`publish`. The server is stopped by PID
at the end of the session (its process group is killed if it does not exit).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from serving_helpers import publish

from inference.serving.process import group_members


@dataclass
class Served:
    handle: object
    root: Path

    @property
    def url(self) -> str:
        return self.handle.url  # type: ignore[attr-defined]

    @property
    def latest(self) -> Path:
        return self.root / "latest"


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from inference.serving.process import start_server

    root = tmp_path_factory.mktemp("serving") / "models"
    publish(root, "v1", seed=0)
    handle = start_server(root / "latest", device="cpu", watch_s=0.3, timeout_s=120)  # (a dependency: no skip)
    try:
        yield Served(handle, root)
    finally:
        handle.stop()
    # stopped by PID: the server, tritonserver and the Python backend stubs (one process group) are gone
    assert group_members(handle.pid) == []
