"""A worker that cannot start says why in one line (streams/worker.py ``start_up``), not in a 90-line
traceback (found by the ops review): no broker at its address, or an embedded archive another
process holds. The real ``semsched worker`` command, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest_kafka import free_port

ROOT = Path(__file__).resolve().parents[2]


def worker(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ops.cli.main", "worker"], env={**os.environ, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_no_broker_is_one_line_naming_the_address(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    r = worker({"SEMSCHED_BOOTSTRAP": bootstrap, "SEMSCHED_STATE_DIR": str(tmp_path), "SEMSCHED_WEB_PORT": "0"})
    assert r.returncode == 1
    [line] = [x for x in r.stderr.splitlines() if x.startswith("semsched worker:")]
    assert line.startswith(f"semsched worker: no Kafka broker answers at {bootstrap} (")
    assert line.endswith("start one with `semsched kafka start`, or set SEMSCHED_BOOTSTRAP")
    assert "Traceback" not in r.stderr


@pytest.mark.integration
def test_an_archive_another_process_holds_is_one_line(kafka_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dsn = f"chdb://{tmp_path / 'chdb'}"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        "from storage.client import get_client\n"
        f"get_client({dsn!r}).query_rows('SELECT 1')\n"
        "print('open', flush=True)\n"
        "time.sleep(120)\n")], stdout=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    from storage.client import held_by_another_process

    assert not held_by_another_process(dsn)  # (a failed migration, say, keeps its own message: not this one)
    try:
        assert holder.stdout.readline().strip() == "open"  # type: ignore[union-attr]
        assert held_by_another_process(dsn)
        r = worker({"SEMSCHED_BOOTSTRAP": kafka_broker.bootstrap, "SEMSCHED_STATE_DIR": str(tmp_path),
                    "SEMSCHED_TOPIC_PREFIX": "startup.", "SEMSCHED_WEB_PORT": "0"})  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 1
    [line] = [x for x in r.stderr.splitlines() if x.startswith("semsched worker:")]
    assert line.startswith(f"semsched worker: cannot open the archive {dsn} (")
    assert "another process (a running worker?) holds its directory" in line and "Traceback" not in r.stderr


def test_agents_without_a_broker_say_so_in_one_line(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    r = subprocess.run([sys.executable, "-m", "ops.cli.main", "agents"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "SEMSCHED_BOOTSTRAP": bootstrap, "SEMSCHED_STATE_DIR": str(tmp_path)},
                       timeout=120)  # fmt: skip
    assert r.returncode == 1
    [line] = [x for x in r.stderr.splitlines() if x.startswith("semsched agents:")]
    assert line.startswith(f"semsched agents: no Kafka broker answers at {bootstrap} (") and "Traceback" not in r.stderr


def test_the_cli_blames_a_running_worker_only_when_one_holds_the_archive(tmp_path: Path) -> None:
    """`semsched sql` said "a running worker owns an embedded archive's directory: stop it first" for
    any error opening an embedded archive; it is said when another process holds it (the same check
    as the worker's start-up: storage.client.held_by_another_process)."""
    dsn = f"chdb://{tmp_path / 'chdb'}"
    code = ("import sys\nfrom ops.cli.db import open_archive\nopen_archive(sys.argv[1], create=True)\n")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time\nfrom storage.client import get_client\n"
        f"get_client({dsn!r}).query_rows('SELECT 1')\nprint('open', flush=True)\ntime.sleep(120)\n")],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "open"  # type: ignore[union-attr]
        held = subprocess.run([sys.executable, "-c", code, dsn], cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert held.returncode == 1 and "a running worker owns an embedded archive's directory" in held.stderr
    (tmp_path / "file").write_text("not a directory")
    other = subprocess.run([sys.executable, "-c", code, f"chdb://{tmp_path / 'file'}"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert other.returncode == 1 and "cannot open the archive" in other.stderr
    assert "a running worker owns" not in other.stderr


def test_db_migrate_blames_a_running_worker_only_when_one_holds_the_archive(tmp_path: Path) -> None:
    """`semsched db migrate` said "a running worker owns the chdb directory" after ClickHouse's stack trace
    for any error on an embedded archive (found by review: the archive path was a file): the error's first
    line, and the hint only when another process holds the directory."""
    (tmp_path / "file").write_text("not a directory")
    r = subprocess.run([sys.executable, "-m", "ops.cli.main", "db", "migrate"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "SEMSCHED_CLICKHOUSE_URL": f"chdb://{tmp_path / 'file'}",
                            "SEMSCHED_STATE_DIR": str(tmp_path)}, timeout=120)  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "migrate failed" in out and "running worker" not in out
    assert len(out.strip().splitlines()) <= 3, out
