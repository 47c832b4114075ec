"""Shared paths for the trace-loader tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.traces.paths import traces_dir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


@pytest.fixture
def fixtures() -> Path:
    """``tests/fixtures/traces`` (laid out like ``<data>/traces``)."""
    return FIXTURES


@pytest.fixture
def shared_traces() -> Path:
    """The full shared traces; skipped (with the path) when they are not on this machine."""
    d = traces_dir()
    if not d.is_dir():
        pytest.skip(f"shared traces not found at {d} (set SEMSCHED_DATA_DIR)")
    return d
