"""Run a local single-node Apache Kafka 4.x broker (KRaft, combined broker+controller).

There is no Kafka distribution to download: the broker's jars are resolved from Maven
Central with ``mvn dependency:copy-dependencies`` against ``ops/kafka/pom.xml`` into a
cached lib directory (:mod:`ops.kafka.jars`), and ``kafka.Kafka`` is run from that class
path with a generated server.properties (:mod:`ops.kafka.config`).

Typical use::

    broker = KafkaBroker(port=19092, data_dir=Path(".state/kafka"))
    broker.start()            # resolves jars if needed, formats storage once, waits for metadata
    print(broker.bootstrap)   # "127.0.0.1:19092"
    broker.stop()

The broker runs detached (own session / process group) and its PID is kept in
``<data_dir>/broker.pid``, so a different process (e.g. ``semsched kafka stop``) can stop it.
Starts and stops of one data dir's broker take turns (``<data_dir>/broker.lock``).
This module is the package's public entry point: it re-exports the errors and helpers of
:mod:`ops.kafka.jars` and :mod:`ops.kafka.config`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ops.kafka import config, jars
from ops.kafka.config import HOST, LOG4J2_CONFIG, NODE_ID  # noqa: F401  (re-exported)
from ops.kafka.jars import (  # noqa: F401  (re-exported: the package's public API lives here)
    DEFAULT_KAFKA_VERSION,
    KAFKA_POM,
    LIB_ENV,
    MARKER_NAME,
    JarResolutionError,
    KafkaBrokerError,
    default_lib_dir,
    kafka_version,
    output_tail,
)
from ops.ports import port_free
from ops.processes import die_with_parent

__all__ = [
    "BrokerStatus",
    "JarResolutionError",
    "KafkaBroker",
    "KafkaBrokerError",
    "KAFKA_POM",
    "LOG4J2_CONFIG",
    "default_lib_dir",
    "kafka_version",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class BrokerStatus:
    """Snapshot of the broker's state as seen from its data directory and port."""

    running: bool
    pid: int | None
    port: int
    controller_port: int
    bootstrap: str
    reachable: bool
    data_dir: Path
    log_file: Path


def _file_tail(path: Path, lines: int = 60) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return "<no log>"
    return output_tail(data, lines) or "<empty log>"


def _port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


def _run_coroutine(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from sync code, even if an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _fetch_metadata(bootstrap: str, timeout: float) -> tuple[str | None, int]:
    """Connect an aiokafka admin client; the cluster id and the number of brokers in the metadata."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=max(1000, int(timeout * 1000)),
        client_id="semsched-kafka-probe",
    )
    try:
        await asyncio.wait_for(admin.start(), timeout)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout)
        return cluster.get("cluster_id"), len(cluster.get("brokers", []))
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


class KafkaBroker:
    """A single-node KRaft Kafka broker (combined broker+controller) bound to 127.0.0.1.

    ``port`` is the PLAINTEXT client port; ``controller_port`` defaults to ``port + 1``.
    All state (server.properties, kraft logs, broker.log, broker.pid, broker.lock) lives in ``data_dir``.
    """

    def __init__(
        self,
        port: int,
        data_dir: Path,
        lib_dir: Path | None = None,
        controller_port: int | None = None,
        *,
        pom: Path = KAFKA_POM,
        heap: str = "512m",
        java: str | None = None,
        tied: bool = False,
    ) -> None:
        self.port = int(port)
        self.tied = tied  # the broker dies with the process that started it (a demo's, a test session's)
        self.data_dir = Path(data_dir).expanduser().absolute()
        if controller_port is None:
            controller_port = self._previous_controller_port() or self.port + 1
        self.controller_port = int(controller_port)
        if self.controller_port == self.port:
            raise ValueError("controller_port must differ from port")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port (1..65535)")
        if not 1 <= self.controller_port <= 65535:  # (port 65535: its controller's 65536 was an OverflowError)
            raise ValueError(f"the controller port {self.controller_port} is not a TCP port (1..65535)"
                             + (": it is port + 1; use a lower port, or name the controller port"
                                if self.controller_port == self.port + 1 else ""))  # fmt: skip
        self.pom = Path(pom)
        self.lib_dir = Path(lib_dir).expanduser().absolute() if lib_dir else default_lib_dir(self.pom)
        self.heap = heap
        self.java = java
        self.last_startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._locked = False  # this object holds broker.lock (start() stops a broker that did not come up)

    # ------------------------------------------------------------------ paths / props
    @property
    def bootstrap(self) -> str:
        """Bootstrap servers string for clients: ``127.0.0.1:<port>``."""
        return f"{HOST}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def lock_file(self) -> Path:
        return self.data_dir / "broker.lock"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log_dirs(self) -> Path:
        return self.data_dir / "kraft-combined-logs"

    @property
    def cluster_id_file(self) -> Path:
        return self.data_dir / "cluster.id"

    def _previous_controller_port(self) -> int | None:
        """Controller port of an earlier run from this data dir with the same client port."""
        return config.previous_controller_port(self.config_file, self.port)

    def __repr__(self) -> str:
        return f"KafkaBroker(bootstrap={self.bootstrap!r}, data_dir={str(self.data_dir)!r})"

    # ------------------------------------------------------------------ jars (ops.kafka.jars)
    def jars_ready(self) -> bool:
        """True when the lib dir holds a complete resolution of the current pom."""
        return jars.jars_ready(self.lib_dir, self.pom)

    def mvn_command(self, output_dir: Path) -> list[str]:
        """The exact Maven command used to resolve the broker class path."""
        return jars.mvn_command(self.pom, output_dir)

    def ensure_jars(self, timeout: float = 900) -> Path:
        """Resolve the Kafka jars into :attr:`lib_dir` unless already complete; return the dir.

        Raises :class:`JarResolutionError` (quoting the command and its output tail) on failure.
        """
        return jars.ensure_jars(self.lib_dir, self.pom, timeout)

    # ------------------------------------------------------------------ config / storage (ops.kafka.config)
    def server_properties(self) -> str:
        """The KRaft server.properties for a single combined broker+controller node."""
        return config.server_properties(self.port, self.controller_port, self.log_dirs)

    def _jvm_args(self, heap: str) -> list[str]:
        return config.jvm_command(self.java, heap, self.data_dir, self.lib_dir)

    def format_storage(self) -> None:
        """Format the KRaft log dir (first start only); the cluster id is kept in ``cluster.id``."""
        config.format_storage(
            config_file=self.config_file,
            log_dirs=self.log_dirs,
            cluster_id_file=self.cluster_id_file,
            java=self.java,
            data_dir=self.data_dir,
            lib_dir=self.lib_dir,
        )

    # ------------------------------------------------------------------ process
    @contextlib.contextmanager
    def _exclusive(self, wait_s: float) -> Iterator[None]:
        """Hold ``<data_dir>/broker.lock``: one start or stop of this data dir's broker at a time, from
        reading ``broker.pid`` until the broker answers (or what failed is cleaned up). Two ``kafka
        start`` at once both found no broker, both spawned one, and the loser's failed start removed the
        winner's PID file: a broker nothing could stop (found by the ops review). Waits up to ``wait_s``
        for another process's start or stop, then :class:`KafkaBrokerError` naming it."""
        if self._locked:  # (start() calls stop() when its broker does not come up)
            yield
            return
        try:
            handle = open(self.lock_file, "a+")  # noqa: SIM115 - the lock lives as long as the open file
        except OSError as e:
            raise KafkaBrokerError(f"cannot take the broker lock {self.lock_file}: {e}") from None
        with handle:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        handle.seek(0)
                        owner = handle.read().strip() or "?"
                        raise KafkaBrokerError(
                            f"another process (pid {owner}) is starting or stopping the broker of {self.data_dir} "
                            f"(for {wait_s:.0f}s now): wait for it, or stop it (kill {owner})"
                        ) from None
                    time.sleep(0.1)
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            self._locked = True
            try:
                yield
            finally:
                self._locked = False

    def read_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def _alive(self, pid: int) -> bool:
        """True if ``pid`` is a live (non-zombie) Kafka broker process."""
        if self._proc is not None and self._proc.pid == pid:
            return self._proc.poll() is None
        with contextlib.suppress(ChildProcessError, OSError):
            reaped, _ = os.waitpid(pid, os.WNOHANG)
            if reaped == pid:
                return False
        proc_dir = Path("/proc") / str(pid)
        if Path("/proc/self").exists():
            try:
                stat = (proc_dir / "stat").read_text()
                cmdline = (proc_dir / "cmdline").read_bytes()
            except OSError:
                return False
            if stat.rsplit(")", 1)[-1].split()[0] in {"Z", "X"}:
                return False
            # this data dir's broker: a recycled PID, or a stale PID file naming another data dir's
            # broker, is not it (found by the ops review: `kafka stop` stopped that other broker)
            return self._runs_this_config(cmdline)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _runs_this_config(self, cmdline: bytes) -> bool:
        """Is this ``kafka.Kafka <config>`` command line the broker of this data dir (its config file, by
        whatever path it was named: a symlinked state dir is the same file)?"""
        args = cmdline.split(b"\0")
        if b"kafka.Kafka" not in args or args.index(b"kafka.Kafka") + 1 >= len(args):
            return False
        named = args[args.index(b"kafka.Kafka") + 1].decode(errors="replace")
        try:
            return os.path.samefile(named, self.config_file)
        except OSError:  # one of the two is gone
            return named == str(self.config_file)

    def is_running(self) -> bool:
        pid = self.read_pid()
        return pid is not None and self._alive(pid)

    def status(self) -> BrokerStatus:
        """Whether the broker is running (by PID file), its PID, ports and bootstrap string."""
        pid = self.read_pid()
        running = pid is not None and self._alive(pid)
        return BrokerStatus(
            running=running,
            pid=pid if running else None,
            port=self.port,
            controller_port=self.controller_port,
            bootstrap=self.bootstrap,
            reachable=_port_open(self.port),
            data_dir=self.data_dir,
            log_file=self.log_file,
        )

    def probe(self, timeout: float = 5.0) -> bool:
        """True if an aiokafka admin client can fetch cluster metadata with >= 1 broker, of this data
        dir's cluster: another broker answering on the port is not this one (found by the ops review:
        a start whose broker could not bind the port took the other's answers for its own)."""
        try:
            cluster, brokers = _run_coroutine(_fetch_metadata(self.bootstrap, timeout))
        except Exception:
            return False
        ours = config.cluster_id(self.log_dirs, self.cluster_id_file)
        return brokers >= 1 and (ours is None or cluster in (ours, None))  # (None: a protocol without the id)

    def start(self, timeout: float = 60) -> BrokerStatus:
        """Start the broker (idempotent) and wait until clients can fetch metadata.

        Raises :class:`KafkaBrokerError` with the tail of ``broker.log`` on failure or timeout.
        """
        t0 = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._exclusive(wait_s=timeout):  # (another start waits here, then finds this one's broker)
            return self._start_locked(t0, timeout)

    def _start_locked(self, t0: float, timeout: float) -> BrokerStatus:
        pid = self.read_pid()
        if pid is not None:
            if self._alive(pid):
                # Report the ports the running broker was actually started with.
                self.controller_port = self._previous_controller_port() or self.controller_port
                if self.probe():
                    self.last_startup_seconds = 0.0
                    return self.status()
                recorded = config.recorded_port(self.config_file)
                if recorded is not None and recorded != self.port:  # (the ops review: it did not say which)
                    raise KafkaBrokerError(
                        f"A broker (pid {pid}) already runs from {self.data_dir} on {HOST}:{recorded}, not "
                        f"{self.bootstrap}: use --port {recorded}, or stop it (`semsched kafka stop -d "
                        f"{self.data_dir}`)")  # fmt: skip
                raise KafkaBrokerError(
                    f"A broker (pid {pid}) is already running from {self.data_dir} but {self.bootstrap} "
                    f"does not answer (still starting?); wait, or stop it: `semsched kafka stop -d {self.data_dir}`."
                    f"\n--- {self.log_file} (tail) ---\n{_file_tail(self.log_file)}"
                )
            self.pid_file.unlink(missing_ok=True)  # stale
        for name, p in (("port", self.port), ("controller port", self.controller_port)):
            if not port_free(p, HOST):
                raise KafkaBrokerError(f"Kafka {name} {HOST}:{p} is already in use")

        resolving = time.monotonic()
        self.ensure_jars()
        # the jars' resolution (a first run's mvn) is not the broker's start: it does not eat its timeout (found
        # by review: a first `semsched demo` whose mvn took longer than 60 s gave up before probing the broker)
        t0 += time.monotonic() - resolving
        self.config_file.write_text(self.server_properties())
        self.format_storage()

        cmd = [*self._jvm_args(self.heap), "kafka.Kafka", str(self.config_file)]
        with self.log_file.open("ab") as log:
            log.write(f"\n=== semsched: starting broker at {time.ctime()}: {shlex.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
                close_fds=True,
                preexec_fn=die_with_parent if self.tied else None,
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")

        deadline = t0 + timeout
        while True:
            if self._proc.poll() is not None:
                rc = self._proc.returncode
                if self.read_pid() == self._proc.pid:  # (only its own: never another start's broker's)
                    self.pid_file.unlink(missing_ok=True)
                raise KafkaBrokerError(
                    f"Kafka broker exited during startup (exit {rc}).\n"
                    f"--- {self.log_file} (tail) ---\n{_file_tail(self.log_file)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # ready: the port answers as this data dir's cluster, and the broker started here still runs
            if (_port_open(self.port) and self.probe(timeout=min(5.0, max(1.0, remaining)))
                    and self._proc.poll() is None):  # fmt: skip
                self.last_startup_seconds = time.monotonic() - t0
                return self.status()
            time.sleep(0.1)

        tail = _file_tail(self.log_file)
        self.stop()
        raise KafkaBrokerError(
            f"Kafka broker on {self.bootstrap} was not ready within {timeout:.0f}s.\n"
            f"--- {self.log_file} (tail) ---\n{tail}"
        )

    def stop(self, timeout: float = 20, lock_wait: float = 120) -> bool:
        """SIGTERM the broker by PID, SIGKILL after ``timeout``; remove the PID file.

        Safe when nothing is running. Returns True if a running broker was stopped; one that outlives
        SIGKILL is a :class:`KafkaBrokerError`. Waits up to ``lock_wait`` seconds for a start or stop of
        another process to finish first.
        """
        if not self.data_dir.is_dir():  # nothing ever ran here
            self._proc = None
            return False
        with self._exclusive(wait_s=lock_wait):
            return self._stop_locked(timeout)

    def _stop_locked(self, timeout: float) -> bool:
        pid = self.read_pid()
        if pid is None or not self._alive(pid):
            self.pid_file.unlink(missing_ok=True)
            self._proc = None
            return False
        self._signal(pid, signal.SIGTERM)
        if not self._wait_dead(pid, timeout):
            self._signal(pid, signal.SIGKILL)
            if not self._wait_dead(pid, 10):  # (it said "stopped" and dropped the PID file of a broker still there)
                raise KafkaBrokerError(f"the broker (pid {pid}) still runs 10 s after SIGKILL (stuck in the kernel?); "
                                       f"{self.pid_file} is kept: stop it again later")  # fmt: skip
        self.pid_file.unlink(missing_ok=True)
        self._proc = None
        return True

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            # start() made the JVM a session/group leader: signal exactly that group.
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    def _wait_dead(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._alive(pid):
                return True
            time.sleep(0.1)
        return not self._alive(pid)
