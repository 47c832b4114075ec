"""Fixtures for the learned DAG policy tests: small generated DAGs (training stream) and
the Topcuoglu et al. 2002 example graph."""

from __future__ import annotations

import pytest
import torch

from ops.workflows import load_topcuoglu
from scheduling.dag import DagGeneratorConfig, DagProblem, training_dags

SMALL = DagGeneratorConfig(tasks_min=10, tasks_max=25)


@pytest.fixture
def small_dags() -> list[DagProblem]:
    return list(training_dags(SMALL, 4, seed=7))


@pytest.fixture
def topcuoglu() -> DagProblem:
    return load_topcuoglu()


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
