"""A real pipeline per test module: the session's Kafka broker, a worker (Faust + chdb
archive) and simulated agents as subprocesses, on topics of their own; stopped by PID."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ops.demo import child_env, free_port, worker_status
from ops.processes import Child, spawn_semsched, wait_for
from streams.settings import Settings


@dataclass
class Pipeline:
    settings: Settings
    run_dir: Path
    children: dict[str, Child] = field(default_factory=dict)
    agent_args: list[str] = field(default_factory=list)

    def start_worker(self) -> Child:
        w = spawn_semsched("worker", ["worker", "--loglevel", "info"], env=child_env(self.settings),
                           run_dir=self.run_dir)  # fmt: skip
        self.children["worker"] = w
        wait_for(lambda: worker_status(self.settings) is not None or not w.alive(), 120, what="the worker")
        assert w.alive(), f"worker died:\n{w.log_tail()}"
        return w

    def start_agents(self) -> Child:
        a = spawn_semsched("agents", ["agents", *self.agent_args], env=child_env(self.settings),
                           run_dir=self.run_dir)  # fmt: skip
        self.children["agents"] = a
        return a

    def status(self) -> dict[str, Any]:
        st = worker_status(self.settings, timeout=5)
        assert st is not None, f"worker not answering:\n{self.children['worker'].log_tail()}"
        return st

    def wait(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        deadline = time.time() + timeout
        st: dict[str, Any] = {}
        while time.time() < deadline:
            w = self.children["worker"]
            assert w.alive(), f"worker died:\n{w.log_tail()}"
            s = worker_status(self.settings, timeout=5)
            if s is not None:
                st = s
                if pred(st):
                    return st
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; last status {st}\n{self.children['worker'].log_tail()}")

    def sql(self, query: str) -> list[list[Any]]:
        """Query the archive the worker owns (its buffered rows flushed first)."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.settings.web_port}/sql?flush=1",
                                     data=query.encode(), method="POST")  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())["rows"]
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{query}\n-> {e.code}: {e.read().decode(errors='replace')}") from None

    def scalar(self, query: str) -> Any:
        return self.sql(query)[0][0]

    def stop(self) -> None:
        for c in reversed(list(self.children.values())):
            c.stop()


@pytest.fixture
def make_pipeline(kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Pipeline]]:
    made: list[Pipeline] = []

    def make(*, agent_args: list[str] | None = None, **overrides: Any) -> Pipeline:
        run_dir = tmp_path_factory.mktemp("pipeline")
        settings = Settings(bootstrap=kafka_broker.bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.",
                            state_dir=run_dir, web_port=free_port(), partitions=4, step_s=0.5,
                            confirm_timeout_s=20, **overrides)  # fmt: skip
        p = Pipeline(settings, run_dir, agent_args=agent_args or ["--speed", "1000", "--max-duration", "2000",
                                                                   "--telemetry", "1"])  # fmt: skip
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()
