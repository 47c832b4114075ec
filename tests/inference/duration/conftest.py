"""Fixtures for the duration-predictor tests: real Google 2011 jobs (a slice), small configs."""

from __future__ import annotations

import pytest

from inference.duration.config import DurationConfig
from inference.duration.evaluate import Finished
from scheduling.job import JobRequest


@pytest.fixture(scope="session")
def google_finished() -> list[Finished]:
    """Every job of the shared Google 2011 part file that has a run time (10,841; a short
    prefix of the file is too censored — only short jobs finish by its cut — to learn from)."""
    from ops.traces import get_loader

    loader = get_loader("google2011")
    return [Finished(j.offset_s, JobRequest.from_event(j.event, submit_time=j.offset_s), j.event.trace_duration_s)
            for j in loader.load_jobs() if j.event.trace_duration_s is not None]  # fmt: skip


@pytest.fixture
def small_config() -> DurationConfig:
    return DurationConfig(encoder="hashed-ngram-32", text_dim=32, hidden=32, epochs=15, version="test")
