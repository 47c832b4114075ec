"""Paths for the workflow-loader tests: the shared workflows (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.workflows import topcuoglu_dir, wfinstance_files, wfinstances_dir


@pytest.fixture
def topcuoglu_csvs() -> Path:
    d = topcuoglu_dir()
    if not d.is_dir():
        pytest.skip(f"shared workflows not found at {d} (set SEMSCHED_DATA_DIR)")
    return d


@pytest.fixture
def wfinstance_paths() -> list[Path]:
    files = wfinstance_files()
    if not files:
        pytest.skip(f"no WfInstances files at {wfinstances_dir()} (set SEMSCHED_DATA_DIR)")
    return files
