"""KafkaBroker's start and stop against a stand-in for the JVM (no Java, no Kafka): a script that
formats the log dir as ``kafka.tools.StorageTool`` does, and as ``kafka.Kafka`` locks it, listens on
the client port and tells each connection its cluster id (what the metadata probe reads here)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.kafka import broker as broker_module
from ops.kafka.broker import KafkaBroker, KafkaBrokerError
from ops.kafka.jars import KAFKA_POM, MARKER_NAME
from tests.conftest_kafka import free_port

FAKE_JAVA = """#!{python}
import fcntl, pathlib, re, socket, sys, time
args = sys.argv[1:]
tool = "kafka.tools.StorageTool" in args
cfg = pathlib.Path(args[args.index("-c") + 1] if tool else args[args.index("kafka.Kafka") + 1]).read_text()
log_dirs = pathlib.Path(re.search(r"^log.dirs=(.*)$", cfg, re.M).group(1))
if tool:
    log_dirs.mkdir(parents=True, exist_ok=True)
    (log_dirs / "meta.properties").write_text("cluster.id=" + args[args.index("-t") + 1] + "\\nnode.id=1\\n")
    sys.exit(0)
lock = open(log_dirs / ".lock", "a")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("Failed to acquire lock on file .lock: another Kafka instance uses this directory", flush=True)
    sys.exit(1)
cluster = re.search(r"^cluster.id=(.*)$", (log_dirs / "meta.properties").read_text(), re.M).group(1)
time.sleep({startup_s})
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    server.bind(("127.0.0.1", int(re.search(r"PLAINTEXT://[^:]*:(\\d+)", cfg).group(1))))
    server.listen()
except OSError as e:
    print("bind failed:", e, flush=True)
    time.sleep(1.0)  # (Kafka logs it and shuts down)
    sys.exit(1)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(cluster.encode() + b"\\n")
    conn.close()
"""


async def _fake_fetch_metadata(bootstrap: str, timeout: float) -> tuple[str | None, int]:
    """The cluster id and the brokers in the metadata the fake broker on ``bootstrap`` answers with."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        return conn.makefile().readline().strip(), 1


@pytest.fixture
def fake_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A lib dir that looks resolved and a fake ``java``; every fake JVM left running is killed."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "kafka_2.13-4.1.1.jar").write_bytes(b"x")
    digest = hashlib.sha256(KAFKA_POM.read_bytes()).hexdigest()
    (lib / MARKER_NAME).write_text(json.dumps({"pom_sha256": digest, "jars": ["kafka_2.13-4.1.1.jar"]}))
    java = tmp_path / "java"
    java.write_text(FAKE_JAVA.format(python=sys.executable, startup_s=0.5))
    java.chmod(0o755)
    monkeypatch.setattr(broker_module, "_fetch_metadata", _fake_fetch_metadata)
    yield {"lib": lib, "java": java}
    for proc_dir in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if str(java).encode() in (proc_dir / "cmdline").read_bytes():
                os.kill(int(proc_dir.name), signal.SIGKILL)


class FormatsTogether(KafkaBroker):
    """Two starts that reach the storage format together, unless one of them is held up before
    (each waits at most ``barrier``'s timeout for the other)."""

    barrier: threading.Barrier

    def format_storage(self) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait()
        super().format_storage()


def _start_both(brokers: list[KafkaBroker]) -> list[object]:
    results: list[object] = [None] * len(brokers)

    def run(i: int) -> None:
        try:
            results[i] = brokers[i].start(timeout=20)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(brokers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_two_starts_at_once_leave_one_broker_that_stop_stops(
    tmp_path: Path, fake_jvm: dict[str, Path]
) -> None:
    """Found by the ops review: two ``kafka start`` on one data dir both found no broker and both
    spawned one; the loser's JVM failed on the log dir's lock, and its start removed broker.pid, which
    named the winner's (or its own) broker: the broker that ran was one nothing could stop."""
    port, data = free_port(), tmp_path / "kafka"
    controller = free_port({port})  # (not port + 1: CI found it taken by another socket)
    FormatsTogether.barrier = threading.Barrier(2, timeout=2.0)
    brokers: list[KafkaBroker] = [
        FormatsTogether(port=port, controller_port=controller, data_dir=data, lib_dir=fake_jvm["lib"],
                        java=str(fake_jvm["java"]))
        for _ in range(2)
    ]
    results = _start_both(brokers)
    running = [b._proc for b in brokers if b._proc is not None and b._proc.poll() is None]
    assert len(running) == 1
    assert brokers[0].read_pid() == running[0].pid  # the broker that runs is the one broker.pid names
    assert [getattr(r, "pid", r) for r in results] == [running[0].pid] * 2  # the second found the first's
    assert sum(b._proc is not None for b in brokers) == 1  # the second spawned none
    assert KafkaBroker(port=port, data_dir=data).stop(timeout=5) is True
    assert running[0].wait(5) is not None


def test_a_stop_during_a_start_waits_for_it_and_stops_the_broker(
    tmp_path: Path, fake_jvm: dict[str, Path]
) -> None:
    """A ``kafka stop`` while a start is under way used to find no PID file yet and say "not running";
    the broker started a moment later and kept running."""
    port, data = free_port(), tmp_path / "kafka"
    FormatsTogether.barrier = threading.Barrier(2, timeout=5.0)
    starting = FormatsTogether(port=port, controller_port=free_port({port}), data_dir=data,
                               lib_dir=fake_jvm["lib"], java=str(fake_jvm["java"]))  # (both ports free: see above)
    failed: list[Exception] = []

    def start() -> None:
        try:
            starting.start(timeout=20)
        except Exception as e:  # noqa: BLE001 - said below, not as a broken barrier
            failed.append(e)
            FormatsTogether.barrier.abort()

    thread = threading.Thread(target=start)
    thread.start()
    try:
        try:
            FormatsTogether.barrier.wait()  # the start is between reading broker.pid and spawning the broker
        except threading.BrokenBarrierError:
            thread.join(30)
            pytest.fail(f"the start never reached the storage format: {failed or 'no error'}")
        assert KafkaBroker(port=port, data_dir=data).stop(timeout=5) is True
    finally:
        thread.join(30)
    assert starting._proc is not None and starting._proc.wait(5) is not None
    assert starting.read_pid() is None


def test_another_broker_answering_on_the_port_is_not_taken_for_this_one(
    tmp_path: Path, fake_jvm: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the ops review: ready was "the port answers and the metadata lists a broker", which
    another broker on the port satisfies (one that took it between the port check and the bind: here
    the check is made to pass). The start returned as if up, and its own broker was exiting."""
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen()
    port = other.getsockname()[1]

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = other.accept()
                with conn:
                    conn.sendall(b"another-cluster\n")

    threading.Thread(target=answer, daemon=True).start()
    monkeypatch.setattr(broker_module, "port_free", lambda port, host="127.0.0.1": True)
    broker = KafkaBroker(
        port=port, data_dir=tmp_path / "kafka", lib_dir=fake_jvm["lib"], java=str(fake_jvm["java"])
    )
    try:
        with pytest.raises(KafkaBrokerError, match=r"exited during startup \(exit 1\)(.|\n)*bind failed"):
            broker.start(timeout=20)
        assert broker.read_pid() is None
    finally:
        other.close()


class SlowJars(KafkaBroker):
    """A first run: resolving the jars (mvn) takes longer than the start's timeout."""

    def ensure_jars(self) -> None:
        import time

        time.sleep(2.5)
        super().ensure_jars()


def test_resolving_the_jars_does_not_eat_the_brokers_start_timeout(tmp_path: Path, fake_jvm: dict[str, Path]) -> None:
    """Found by review: the deadline started before the jars were resolved; a first `semsched demo` whose
    mvn took longer than the timeout killed a broker it had never probed ("not ready within 60s")."""
    port = free_port()
    b = SlowJars(port=port, controller_port=free_port({port}), data_dir=tmp_path / "kafka", lib_dir=fake_jvm["lib"],
                 java=str(fake_jvm["java"]))  # fmt: skip
    try:
        status = b.start(timeout=2.0)
        assert status.pid == b._proc.pid and b.last_startup_seconds < 2.0
    finally:
        b.stop(timeout=5)
