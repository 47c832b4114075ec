"""Run a local single-node Apache Kafka 4.x broker (KRaft, combined broker+controller).

There is no Kafka distribution to download: the broker's jars are resolved from Maven
Central with ``mvn dependency:copy-dependencies`` against ``ops/kafka/pom.xml`` into a
cached lib directory, and ``kafka.Kafka`` is run from that class path.

Typical use::

    broker = KafkaBroker(port=19092, data_dir=Path(".state/kafka"))
    broker.start()            # resolves jars if needed, formats storage once, waits for metadata
    print(broker.bootstrap)   # "127.0.0.1:19092"
    broker.stop()

The broker runs detached (own session / process group) and its PID is kept in
``<data_dir>/broker.pid``, so a different process (e.g. ``semsched kafka stop``) can stop it.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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

KAFKA_POM = Path(__file__).with_name("pom.xml")
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
DEFAULT_KAFKA_VERSION = "4.1.1"
LIB_ENV = "SEMSCHED_KAFKA_LIB"
MARKER_NAME = ".semsched-kafka-lib.json"
NODE_ID = 1
HOST = "127.0.0.1"

_T = TypeVar("_T")


class KafkaBrokerError(RuntimeError):
    """The local broker could not be started, reached or stopped."""


class JarResolutionError(KafkaBrokerError):
    """``mvn dependency:copy-dependencies`` failed; carries the command and its output tail."""

    def __init__(self, message: str, command: list[str], stderr_tail: str) -> None:
        super().__init__(message)
        self.command = command
        self.stderr_tail = stderr_tail


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


def kafka_version(pom: Path = KAFKA_POM) -> str:
    """The ``<kafka.version>`` property of the pom (falls back to the version we ship)."""
    try:
        match = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom.read_text())
    except OSError:
        match = None
    return match.group(1) if match else DEFAULT_KAFKA_VERSION


def default_lib_dir(pom: Path = KAFKA_POM) -> Path:
    """``$SEMSCHED_KAFKA_LIB`` or ``~/.cache/semsched/kafka-<version>/lib``."""
    env = os.environ.get(LIB_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "semsched" / f"kafka-{kafka_version(pom)}" / "lib"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _file_tail(path: Path, lines: int = 60) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return "<no log>"
    return _tail(data, lines) or "<empty log>"


def _port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


def _port_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _new_cluster_id() -> str:
    """A Kafka cluster id: url-safe base64 of a random UUID, no padding, no leading '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _run_coroutine(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from sync code, even if an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _fetch_metadata(bootstrap: str, timeout: float) -> int:
    """Connect an aiokafka admin client and return the number of brokers in the metadata."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=max(1000, int(timeout * 1000)),
        client_id="semsched-kafka-probe",
    )
    try:
        await asyncio.wait_for(admin.start(), timeout)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout)
        return len(cluster.get("brokers", []))
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class KafkaBroker:
    """A single-node KRaft Kafka broker (combined broker+controller) bound to 127.0.0.1.

    ``port`` is the PLAINTEXT client port; ``controller_port`` defaults to ``port + 1``.
    All state (server.properties, kraft logs, broker.log, broker.pid) lives in ``data_dir``.
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
    ) -> None:
        self.port = int(port)
        self.data_dir = Path(data_dir).expanduser().absolute()
        if controller_port is None:
            controller_port = self._previous_controller_port() or self.port + 1
        self.controller_port = int(controller_port)
        if self.controller_port == self.port:
            raise ValueError("controller_port must differ from port")
        self.pom = Path(pom)
        self.lib_dir = Path(lib_dir).expanduser().absolute() if lib_dir else default_lib_dir(self.pom)
        self.heap = heap
        self.java = java
        self.last_startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

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
        try:
            text = self.config_file.read_text()
        except OSError:
            return None
        if not re.search(rf"^listeners=.*PLAINTEXT://[^,\s]*:{self.port}(,|$)", text, re.M):
            return None
        match = re.search(r"^listeners=.*CONTROLLER://[^,\s]*:(\d+)", text, re.M)
        return int(match.group(1)) if match else None

    def __repr__(self) -> str:
        return f"KafkaBroker(bootstrap={self.bootstrap!r}, data_dir={str(self.data_dir)!r})"

    # ------------------------------------------------------------------ jars
    def _pom_digest(self) -> str:
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    def _marker(self) -> Path:
        return self.lib_dir / MARKER_NAME

    def jars_ready(self) -> bool:
        """True when the lib dir holds a complete resolution of the current pom."""
        try:
            marker = json.loads(self._marker().read_text())
            if marker.get("pom_sha256") != self._pom_digest():
                return False
            jars = marker.get("jars") or []
        except (OSError, ValueError):
            return False
        if not any(j.startswith("kafka_2.13-") for j in jars):
            return False
        return all((self.lib_dir / j).is_file() for j in jars)

    def mvn_command(self, output_dir: Path) -> list[str]:
        """The exact Maven command used to resolve the broker class path."""
        return [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(self.pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={output_dir}",
        ]

    def ensure_jars(self, timeout: float = 900) -> Path:
        """Resolve the Kafka jars into :attr:`lib_dir` unless already complete; return the dir.

        Raises :class:`JarResolutionError` (quoting the command and its output tail) on failure.
        """
        if self.jars_ready():
            return self.lib_dir
        self.lib_dir.parent.mkdir(parents=True, exist_ok=True)
        with _flock(self.lib_dir.parent / f".{self.lib_dir.name}.lock"):
            if self.jars_ready():  # resolved by a concurrent process while we waited
                return self.lib_dir
            tmp = Path(tempfile.mkdtemp(prefix=f".{self.lib_dir.name}-", dir=self.lib_dir.parent))
            try:
                cmd = self.mvn_command(tmp)
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
                except FileNotFoundError as exc:
                    raise JarResolutionError(
                        f"Cannot resolve Kafka jars: `mvn` is not on PATH.\n  command: {shlex.join(cmd)}",
                        cmd,
                        str(exc),
                    ) from exc
                except subprocess.TimeoutExpired as exc:
                    raw = exc.stderr or exc.stdout or ""
                    out = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                    raise JarResolutionError(
                        f"Resolving Kafka jars timed out after {timeout:.0f}s.\n"
                        f"  command: {shlex.join(cmd)}\n{_tail(out)}",
                        cmd,
                        _tail(out),
                    ) from exc
                jars = sorted(p.name for p in tmp.glob("*.jar"))
                if proc.returncode != 0 or not any(j.startswith("kafka_2.13-") for j in jars):
                    # Maven writes [ERROR] lines to stdout; show stderr first, then stdout.
                    tail = _tail(proc.stderr, 30)
                    out_tail = _tail(proc.stdout, 30)
                    details = "\n".join(
                        part
                        for part in (
                            f"  stderr (tail):\n{tail}" if tail else "",
                            f"  stdout (tail):\n{out_tail}" if out_tail else "",
                        )
                        if part
                    )
                    raise JarResolutionError(
                        f"Resolving Kafka jars into {self.lib_dir} failed (exit {proc.returncode}, "
                        f"{len(jars)} jars).\n"
                        f"  command: {shlex.join(cmd)}\n{details or '  (no output)'}",
                        cmd,
                        tail or out_tail,
                    )
                self.lib_dir.mkdir(parents=True, exist_ok=True)
                for stale in self.lib_dir.glob("*.jar"):  # e.g. a different slf4j-api version
                    stale.unlink()
                for jar in jars:
                    os.replace(tmp / jar, self.lib_dir / jar)
                self._marker().write_text(
                    json.dumps({"pom_sha256": self._pom_digest(), "jars": jars, "resolved_at": time.time()})
                )
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return self.lib_dir

    # ------------------------------------------------------------------ config / storage
    def server_properties(self) -> str:
        """The KRaft server.properties for a single combined broker+controller node."""
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": NODE_ID,
            # Static quorum: works with `kafka-storage format` without --standalone and lets
            # the controller port change between runs.
            "controller.quorum.voters": f"{NODE_ID}@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dirs),
            "num.partitions": 4,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "message.max.bytes": 1048588,
            "replica.fetch.max.bytes": 1048588,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 8,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 8,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            # Lean: this is a dev/test broker on a 2-core budget.
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "num.replica.fetchers": 1,
            "log.cleaner.threads": 1,
            "log.retention.hours": 168,
            "log.segment.bytes": 64 * 1024 * 1024,
        }
        header = "# Generated by ops/kafka/broker.py (semsched) -- rewritten on every start.\n"
        return header + "".join(f"{k}={v}\n" for k, v in props.items())

    def _java(self) -> str:
        if self.java:
            return self.java
        java_home = os.environ.get("JAVA_HOME")
        if java_home and (Path(java_home) / "bin" / "java").is_file():
            return str(Path(java_home) / "bin" / "java")
        found = shutil.which("java")
        if not found:
            raise KafkaBrokerError("`java` (17+) is not on PATH and JAVA_HOME is not set")
        return found

    def _jvm_args(self, heap: str) -> list[str]:
        return [
            self._java(),
            f"-Xmx{heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:ActiveProcessorCount=2",
            "-XX:TieredStopAtLevel=1",
            "-Xss512k",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            "-Dlog4j2.disable.jmx=true",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp",
            f"{self.lib_dir}/*",  # the JVM expands the wildcard itself
        ]

    def _is_formatted(self) -> bool:
        return (self.log_dirs / "meta.properties").is_file()

    def format_storage(self) -> None:
        """Format the KRaft log dir (first start only); the cluster id is kept in ``cluster.id``."""
        if self._is_formatted():
            return
        if self.cluster_id_file.is_file():
            cluster_id = self.cluster_id_file.read_text().strip()
        else:
            cluster_id = _new_cluster_id()
            self.cluster_id_file.write_text(cluster_id + "\n")
        cmd = [
            *self._jvm_args("256m"),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(self.config_file),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0 or not self._is_formatted():
            raise KafkaBrokerError(
                f"Formatting Kafka storage failed (exit {proc.returncode}).\n"
                f"  command: {shlex.join(cmd)}\n{_tail(proc.stderr + proc.stdout)}"
            )

    # ------------------------------------------------------------------ process
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
            return b"kafka.Kafka" in cmdline  # guards against a recycled PID
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

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
        """True if an aiokafka admin client can fetch cluster metadata with >= 1 broker."""
        try:
            return _run_coroutine(_fetch_metadata(self.bootstrap, timeout)) >= 1
        except Exception:
            return False

    def start(self, timeout: float = 60) -> BrokerStatus:
        """Start the broker (idempotent) and wait until clients can fetch metadata.

        Raises :class:`KafkaBrokerError` with the tail of ``broker.log`` on failure or timeout.
        """
        t0 = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pid = self.read_pid()
        if pid is not None:
            if self._alive(pid):
                # Report the ports the running broker was actually started with.
                self.controller_port = self._previous_controller_port() or self.controller_port
                if self.probe():
                    self.last_startup_seconds = 0.0
                    return self.status()
                raise KafkaBrokerError(
                    f"A broker (pid {pid}) is already running from {self.data_dir} but {self.bootstrap} "
                    f"does not answer; stop it first.\n--- {self.log_file} (tail) ---\n"
                    f"{_file_tail(self.log_file)}"
                )
            self.pid_file.unlink(missing_ok=True)  # stale
        for name, p in (("port", self.port), ("controller port", self.controller_port)):
            if not _port_free(p):
                raise KafkaBrokerError(f"Kafka {name} {HOST}:{p} is already in use")

        self.ensure_jars()
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
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")

        deadline = t0 + timeout
        while True:
            if self._proc.poll() is not None:
                rc = self._proc.returncode
                self.pid_file.unlink(missing_ok=True)
                raise KafkaBrokerError(
                    f"Kafka broker exited during startup (exit {rc}).\n"
                    f"--- {self.log_file} (tail) ---\n{_file_tail(self.log_file)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if _port_open(self.port) and self.probe(timeout=min(5.0, max(1.0, remaining))):
                self.last_startup_seconds = time.monotonic() - t0
                return self.status()
            time.sleep(0.1)

        tail = _file_tail(self.log_file)
        self.stop()
        raise KafkaBrokerError(
            f"Kafka broker on {self.bootstrap} was not ready within {timeout:.0f}s.\n"
            f"--- {self.log_file} (tail) ---\n{tail}"
        )

    def stop(self, timeout: float = 20) -> bool:
        """SIGTERM the broker by PID, SIGKILL after ``timeout``; remove the PID file.

        Safe when nothing is running. Returns True if a running broker was stopped.
        """
        pid = self.read_pid()
        if pid is None or not self._alive(pid):
            self.pid_file.unlink(missing_ok=True)
            self._proc = None
            return False
        self._signal(pid, signal.SIGTERM)
        if not self._wait_dead(pid, timeout):
            self._signal(pid, signal.SIGKILL)
            self._wait_dead(pid, 10)
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
