"""Fixtures for the DAG tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dag_builders import topcuoglu_problem  # noqa: E402

from scheduling.dag import DagProblem  # noqa: E402


@pytest.fixture
def topcuoglu() -> DagProblem:
    return topcuoglu_problem()
