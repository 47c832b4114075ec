"""The control plane on one machine: a Kafka broker, a worker and the simulated agents as
processes under one run directory, stopped by PID. The demo, the pipeline benchmark and
the integration tests all run the stack this one way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ops.ports import port_free
from ops.processes import Child, live_pid, spawn_semsched, wait_for, write_pid_file
from streams.settings import Settings


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports, all bound at once (one at a time, the OS may hand one out twice)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def child_env(settings: Settings) -> dict[str, str]:
    """The ``SEMSCHED_*`` environment that makes a child process use ``settings``."""
    return {
        "SEMSCHED_BOOTSTRAP": settings.bootstrap,
        "SEMSCHED_STATE_DIR": str(settings.state_dir),
        "SEMSCHED_TOPIC_PREFIX": settings.topic_prefix,
        "SEMSCHED_PARTITIONS": str(settings.partitions),
        "SEMSCHED_REPLICATION_FACTOR": str(settings.replication_factor),
        "SEMSCHED_WEB_PORT": str(settings.web_port),
        "SEMSCHED_POLICY": settings.policy,
        "SEMSCHED_STEP": str(settings.step_s),
        # (within the step: settings copied with a shorter step kept the default debounce, which the child refused)
        "SEMSCHED_EVENT_DEBOUNCE": str(min(settings.event_debounce_s, settings.step_s)),
        "SEMSCHED_CLICKHOUSE_URL": settings.clickhouse_url,
        "SEMSCHED_SESSION_TIMEOUT": str(settings.session_timeout_s),
        "SEMSCHED_CONFIRM_TIMEOUT": str(settings.confirm_timeout_s),
        "SEMSCHED_MAX_RETRIES": str(settings.max_retries),
        "SEMSCHED_NODE_LOST": str(settings.node_lost_s),
        "SEMSCHED_NODE_SILENT": str(settings.node_silent_s),
        "SEMSCHED_SNAPSHOT_VERIFY": str(settings.snapshot_verify_s),
        "SEMSCHED_STOP_TIMEOUT": str(settings.stop_timeout_s),
        "SEMSCHED_DONE_RETENTION": str(settings.done_retention_s),
        "SEMSCHED_OTEL_EXPORTER": settings.otel_exporter,
    }


def worker_status(settings: Settings, timeout: float = 2.0) -> dict[str, Any] | None:
    """The worker's ``/status``, or ``None`` when no worker answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}/status", timeout=timeout) as r:
            return json.loads(r.read())
    except OSError:
        return None


def stop_leftovers(run_dir: Path) -> None:
    """Stop what an earlier run under ``run_dir`` left running (it was killed before it
    could clean up): its worker and agents by their PID files, its broker by its own."""
    from ops.kafka.broker import KafkaBroker

    for pid_file in run_dir.glob("*.pid"):
        pid = live_pid(pid_file)  # only the very process the file names (a PID gets reused: once, another
        if pid is not None:       # session's worker would have been killed)
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
    if (run_dir / "kafka" / "broker.pid").exists():
        port, controller_port = free_ports(2)  # (stop() uses neither; free_port() + 1 could be 65536)
        KafkaBroker(port=port, controller_port=controller_port, data_dir=run_dir / "kafka").stop()


class StackBusy(RuntimeError):
    """A stack cannot start here now: another process runs one under the same directory, or its port is taken."""


def ports_problem(port: int) -> str | None:
    """Why the broker cannot listen on ``port`` and its controller on ``port + 1`` (a busy controller
    port, or 65536, was found only once the last run's archive was wiped: found by the ops review)."""
    for p, what in ((port, "Kafka port"), (port + 1, "Kafka controller port (--port + 1)")):
        if p > 65535:
            return f"the {what} would be {p}, past 65535: choose --port 65534 or lower"
        if not port_free(p):
            return (f"{what} 127.0.0.1:{p} is in use (a broker from `semsched kafka start`? `semsched kafka stop` "
                    'stops it), or choose another port: --port N (make demo ARGS="--port N")')  # fmt: skip
    return None


def stack_ports(port: int = 0, tries: int = 100) -> tuple[int, int]:
    """The broker's client port (``port``, or a free one whose controller port, the next, is free too) and
    a free web port for the worker, which is neither."""
    for _ in range(tries):
        kafka_port, web_port = free_ports(2)
        kafka_port = port or kafka_port
        if web_port not in (kafka_port, kafka_port + 1) and (port or not ports_problem(kafka_port)):
            return kafka_port, web_port
    raise StackBusy(f"no free ports for a Kafka broker (a port and the next) and a worker after {tries} tries")


def hold_run_lock(run_dir: Path) -> Any:
    """An exclusive lock on ``<run_dir>.lock`` (beside the directory, which is wiped), held by the
    returned open file for as long as this process keeps it. Another process running a stack
    there: :class:`StackBusy`, naming it (found by the ops review: a second ``semsched demo`` killed
    the running one's worker, agents and broker and wiped its archive)."""
    import fcntl

    path = run_dir.parent / f"{run_dir.name}.lock"
    try:  # (the directory too: found by review, SEMSCHED_STATE_DIR=/dev/null/state gave a traceback)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115 - held open: the lock lives as long as the file
    except OSError as e:  # another user's (an earlier `sudo make demo`), a read-only state dir
        raise StackBusy(f"cannot take the run lock {path}: {e}: remove it, or use another state directory "
                        "(SEMSCHED_STATE_DIR)") from None  # fmt: skip
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip() or "?"
        handle.close()
        raise StackBusy(f"another semsched process (pid {owner}) is running a stack under {run_dir}: wait for "
                        f"it, stop it (kill {owner}), or use another state directory (SEMSCHED_STATE_DIR)") from None
    handle.truncate(0)
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


class LocalStack:
    """``settings`` say where everything talks; ``run_dir`` holds logs, PID files and state."""

    def __init__(self, settings: Settings, run_dir: Path) -> None:
        self.settings = settings
        self.run_dir = run_dir
        self.broker: Any = None
        self.children: dict[str, Child] = {}
        self.servers: list[Any] = []  # Triton servers (inference.serving.process.ServerHandle)
        self.lock: Any = None  # fresh(): the run's lock, held while this process lives

    @classmethod
    def fresh(cls, name: str, *, port: int = 0, state_root: Path | None = None, **overrides: Any) -> LocalStack:
        """A stack under ``<state>/<name>``, wiped first (its archive then holds this run only). Refused
        (:class:`StackBusy`), before anything is touched, while another process runs a stack there
        or when ``port`` is taken."""
        base = Settings()
        run_dir = (state_root or base.state_dir) / name
        lock = hold_run_lock(run_dir)
        if run_dir.exists():
            stop_leftovers(run_dir)  # (what a killed run left: the lock says no live one owns them)
        if port and (problem := ports_problem(port)):  # before the wipe: the last run's archive stays when this one cannot start
            lock.close()
            raise StackBusy(problem)
        shutil.rmtree(run_dir, ignore_errors=True)
        try:
            run_dir.mkdir(parents=True)
        except OSError as e:  # (what the wipe could not remove: another user's files, say)
            lock.close()
            raise StackBusy(f"cannot make the run directory {run_dir}: {e.strerror or e}: remove it, or use "
                            "another state directory (SEMSCHED_STATE_DIR)") from None  # fmt: skip
        kafka_port, web_port = stack_ports(port)
        settings = base.model_copy(update={
            "bootstrap": f"127.0.0.1:{port or kafka_port}", "state_dir": run_dir, "topic_prefix": "semsched.",
            "web_port": web_port, "replication_factor": 1, **overrides,  # (one broker, whatever the shell exports)
        })  # fmt: skip
        stack = cls(settings, run_dir)
        stack.lock = lock
        return stack

    # -- processes --------------------------------------------------------------------------
    def start_broker(self) -> float:
        """Start the local broker on the settings' port and create the topics; returns seconds."""
        from ops.kafka.broker import KafkaBroker
        from streams.topics import ensure_topics

        t0 = time.time()
        port = int(self.settings.bootstrap.rsplit(":", 1)[1])
        self.broker = KafkaBroker(port=port, data_dir=self.run_dir / "kafka", tied=True)
        self.broker.start()
        asyncio.run(ensure_topics(self.settings))
        return time.time() - t0

    def start_worker(self, *args: str, timeout: float = 120, name: str = "worker",
                     settings: Settings | None = None, env: dict[str, str] | None = None) -> Child:  # fmt: skip
        """Start a worker; a second one (another ``name``) needs its own ``settings`` (web
        port, state dir) and, in embedded mode, ``--no-archive`` (one process owns chdb).
        ``env``: more variables, e.g. the learned policy's ``SEMSCHED_INFERENCE`` / ``SEMSCHED_MODEL_DIR``."""
        s = settings or self.settings
        w = spawn_semsched(name, ["worker", *args], env={**child_env(s), **(env or {})}, run_dir=self.run_dir)
        self.children[name] = w
        wait_for(lambda: worker_status(s) is not None or not w.alive(), timeout, what=f"the {name}")
        if not w.alive():
            raise RuntimeError(f"the worker died:\n{w.log_tail()}")
        return w

    def start_triton(self, model_dir: Path, device: str = "cpu") -> tuple[Any, str, float]:
        """Start a Triton server (``inference.serving``) for ``model_dir``, ready when this
        returns; stopped with the stack. Returns the handle, its gRPC URL and the seconds it took."""
        from inference.serving.process import start_server

        t0 = time.time()
        handle = start_server(model_dir, device=device, log_path=self.run_dir / "triton.log")
        self.servers.append(handle)
        write_pid_file(self.run_dir / "triton.pid", handle.pid)  # for stop_leftovers
        return handle, handle.url, time.time() - t0

    def start_agents(self, *args: str) -> Child:
        a = spawn_semsched("agents", ["agents", *args], env=child_env(self.settings), run_dir=self.run_dir)
        self.children["agents"] = a
        return a

    def stop(self) -> None:
        """Stop every child (agents first) and the broker, by PID; safe to call twice."""
        for c in reversed(list(self.children.values())):
            c.stop()
        for server in self.servers:
            server.stop()
        if self.broker is not None:
            self.broker.stop()

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- {c.name} log tail ({c.log_path}) ---\n{c.log_tail(lines)}"
                         for c in self.children.values())  # fmt: skip

    # -- talking to the worker --------------------------------------------------------------
    def status(self, timeout: float = 2.0) -> dict[str, Any] | None:
        return worker_status(self.settings, timeout)

    def wait(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str,
             on_status: Callable[[dict[str, Any]], None] | None = None,
             needs: Sequence[str] = ("worker",)) -> dict[str, Any]:  # fmt: skip
        """Poll ``/status`` until ``pred`` holds; fails fast if a child ``pred`` ``needs`` dies (the
        worker; the demo's jobs also need the agents: without them nothing runs)."""
        deadline = time.time() + timeout
        last: dict[str, Any] = {}
        while time.time() < deadline:
            for name in needs:
                child = self.children.get(name)
                if child is not None and not child.alive():
                    raise RuntimeError(f"the {name} died:\n{child.log_tail()}")
            st = self.status(timeout=5)
            if st is not None:
                last = st
                if on_status is not None:
                    on_status(st)
                if pred(st):
                    return st
            time.sleep(0.5)
        # (the children's logs say why: a flaky CI failure showed the status alone)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last status: {last}\n{self.log_tails()}")

    def sql(self, query: str, *, flush: bool = True, timeout: float = 120.0) -> list[list[Any]]:
        """Query the archive the running worker owns (``flush``: its buffered rows first)."""
        url = f"http://127.0.0.1:{self.settings.web_port}/sql" + ("?flush=1" if flush else "")
        deadline = time.monotonic() + timeout
        while True:
            req = urllib.request.Request(url, data=query.encode(), method="POST")
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    return json.loads(r.read())["rows"]  # type: ignore[no-any-return]
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")
                # a restarted worker's archiver opening the archive (streams/web.py): again, in a moment
                if e.code != 503 or "archiver is starting" not in detail or time.monotonic() > deadline:
                    raise RuntimeError(f"/sql failed ({e.code}): {detail}\n{query}") from None
            time.sleep(0.5)

    def scalar(self, query: str) -> Any:
        return self.sql(query)[0][0]

    def wait_scalar(self, query: str, want: Any, timeout: float) -> Any:
        """Poll ``query`` until it returns ``want``: the archiver is a consumer of its own and may
        still be catching up when the worker's tables have settled (a restarted one first waits
        for its group's rebalance). Returns the last value, ``want`` or not, for the caller to assert."""
        deadline = time.time() + timeout
        got = self.scalar(query)
        while got != want and time.time() < deadline:
            time.sleep(0.5)
            got = self.scalar(query)
        return got
