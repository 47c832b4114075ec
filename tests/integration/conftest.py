"""A real stack per test: the session's Kafka broker, a worker (Faust + chdb archive) and
simulated agents as subprocesses (ops.local_stack), on topics and a state directory of
their own; stopped by PID at teardown."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ops.local_stack import LocalStack, free_port
from streams.settings import Settings

FAST_AGENTS = ("--speed", "1000", "--max-duration", "2000", "--telemetry", "1")


@pytest.fixture
def make_stack(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LocalStack]]:
    made: list[LocalStack] = []

    def make(**overrides: Any) -> LocalStack:
        run_dir = tmp_path_factory.mktemp("stack")
        settings = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.",
                            state_dir=run_dir, web_port=free_port(), partitions=4, step_s=0.5,
                            confirm_timeout_s=20, **overrides)  # fmt: skip
        stack = LocalStack(settings, run_dir)
        made.append(stack)
        return stack

    yield make
    for stack in made:
        stack.stop()
