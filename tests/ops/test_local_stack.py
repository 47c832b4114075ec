"""What a killed run leaves behind is stopped by the next one, by PID, and only if the PID
is still one of ours."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

from ops.local_stack import stop_leftovers


def _spawn(tag: str) -> subprocess.Popen:  # type: ignore[type-arg]
    """A sleeping child whose command line carries ``tag``, returned once /proc shows it: Popen
    returns when exec has closed the child's close-on-exec pipe, a moment before the kernel sets up
    the new command line (a CI run read it empty there, and the child was not recognised)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag], start_new_session=True)
    for _ in range(100):
        if tag.encode() in Path(f"/proc/{p.pid}/cmdline").read_bytes():
            break
        time.sleep(0.05)
    return p


def test_leftover_children_are_stopped_and_strangers_are_not(tmp_path: Path) -> None:
    """A PID file names one process: its PID and when it started. A PID reused by another process
    (after a reboot, in another container), or a file of another format, stops nothing (found by the
    ops review: any ``ops.cli.main`` under that PID was SIGKILLed, another session's worker too)."""
    from ops.processes import start_ticks, write_pid_file

    ours, older, reused, stranger = (_spawn("ops.cli.main"), _spawn("ops.cli.main"), _spawn("ops.cli.main"),
                                     _spawn("someone-else"))  # fmt: skip
    try:
        write_pid_file(tmp_path / "worker.pid", ours.pid)
        (tmp_path / "old.pid").write_text(str(older.pid))  # the earlier format: the PID alone, a semsched process
        (tmp_path / "agents.pid").write_text(f"{reused.pid} {(start_ticks(reused.pid) or 0) + 1}\n")  # not it
        (tmp_path / "triton.pid").write_text(str(stranger.pid))  # the PID alone, not semsched's
        stop_leftovers(tmp_path)
        for _ in range(50):
            if ours.poll() is not None and older.poll() is not None:
                break
            time.sleep(0.1)
        assert ours.poll() is not None and older.poll() is not None
        assert reused.poll() is None and stranger.poll() is None
    finally:
        for p in (ours, older, reused, stranger):
            p.kill()
            p.wait()


def test_a_second_stack_on_the_same_directory_is_refused_before_it_touches_it(tmp_path: Path) -> None:
    """Found by the ops review: a second ``semsched demo`` on the same state dir killed the running
    one's worker, agents and broker and wiped its archive. A taken port is said before the last
    run's archive is wiped, too."""
    import os
    import socket

    import pytest

    from ops.local_stack import LocalStack, StackBusy

    first = LocalStack.fresh("demo", state_root=tmp_path)
    (first.run_dir / "archive").write_text("the first run's")
    with pytest.raises(StackBusy, match=rf"another semsched process \(pid {os.getpid()}\) is running a stack under"):
        LocalStack.fresh("demo", state_root=tmp_path)
    assert (first.run_dir / "archive").read_text() == "the first run's"
    first.lock.close()  # the first run ends
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StackBusy, match=f"Kafka port 127.0.0.1:{port} is in use"):
            LocalStack.fresh("demo", port=port, state_root=tmp_path)
    assert (first.run_dir / "archive").exists()  # not wiped: this run could not start
    second = LocalStack.fresh("demo", state_root=tmp_path)
    assert not (second.run_dir / "archive").exists()  # a run that starts has its own archive
    second.lock.close()


def test_a_child_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """A demo or a benchmark killed with SIGKILL left its worker, agents, broker and Triton server
    running (the ops review): they get SIGTERM when it dies (PR_SET_PDEATHSIG)."""
    import os
    import signal

    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from ops.processes import die_with_parent\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], preexec_fn=die_with_parent,"
        " start_new_session=True)\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(120)\n")], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    try:
        child = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert Path(f"/proc/{child}").exists()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        for _ in range(100):
            if not Path(f"/proc/{child}").exists():
                break
            time.sleep(0.05)
        assert not Path(f"/proc/{child}").exists()
    finally:
        parent.kill()
        parent.wait()


class _Dead:
    name = "agents"
    log_path = Path("agents.log")

    def alive(self) -> bool:
        return False

    def log_tail(self, lines: int = 15) -> str:
        return "Invalid value for '--speed': must be a finite number > 0, not inf"


def test_a_wait_fails_fast_when_a_child_it_needs_dies(tmp_path: Path) -> None:
    """The demo's jobs need the agents as well as the worker: with the agents dead (say, an option they
    refuse) nothing ever runs, and the demo waited out its whole timeout (found by review). A wait names
    what it needs; by default the worker alone (a test may stop the agents on purpose)."""
    import pytest

    from ops.local_stack import LocalStack
    from streams.settings import Settings

    stack = LocalStack(Settings(web_port=1), tmp_path)
    stack.children["agents"] = _Dead()  # type: ignore[assignment]
    started = time.time()
    with pytest.raises(RuntimeError, match="the agents died:\nInvalid value for '--speed'"):
        stack.wait(lambda st: False, 60, "the jobs", needs=("worker", "agents"))
    assert time.time() - started < 5
    # a timeout carries the children's log tails (a flaky CI failure once showed the worker's status alone)
    with pytest.raises(TimeoutError, match="(?s)--- agents log tail .*Invalid value for '--speed'"):
        stack.wait(lambda st: False, 0.2, "the jobs")


def test_a_busy_or_impossible_controller_port_is_said_before_the_last_run_is_wiped(tmp_path: Path) -> None:
    """Found by the ops review: the controller port (--port + 1) was not checked: a busy one wiped the last
    run's archive and then failed the broker's start, and --port 65535 was an OverflowError traceback."""
    import socket

    import pytest

    from ops.local_stack import LocalStack, StackBusy, stack_ports
    from ops.ports import port_free

    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "archive").write_text("the last run's")
    with contextlib.ExitStack() as held:
        for _ in range(100):  # a taken port whose previous one is free (found by the flakiness review: bind(0)
            taken = held.enter_context(socket.socket())  # gives odd ports, and clients' even ones sit below them)
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            controller = taken.getsockname()[1]
            if port_free(controller - 1):
                break
        with pytest.raises(StackBusy, match=rf"Kafka controller port \(--port \+ 1\) 127.0.0.1:{controller} is in use"):
            LocalStack.fresh("demo", port=controller - 1, state_root=tmp_path)
    with pytest.raises(StackBusy, match="the Kafka controller port .* would be 65536, past 65535: choose --port 65534"):
        LocalStack.fresh("demo", port=65535, state_root=tmp_path)
    assert (tmp_path / "demo" / "archive").read_text() == "the last run's"
    for _ in range(20):  # a port of its own choosing has a free next port, and the worker's web port is neither
        kafka_port, web_port = stack_ports()
        assert kafka_port < 65535 and web_port not in (kafka_port, kafka_port + 1)


def test_the_single_broker_stack_takes_one_replica_whatever_the_shell_exports(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """SEMSCHED_REPLICATION_FACTOR=3 exported for a production cluster made the local demo's topics refused
    by its one broker, and the children did not get the stack's value (found by review)."""
    from ops.local_stack import LocalStack, child_env

    monkeypatch.setenv("SEMSCHED_REPLICATION_FACTOR", "3")
    stack = LocalStack.fresh("demo", state_root=tmp_path)
    try:
        assert stack.settings.replication_factor == 1
        assert child_env(stack.settings)["SEMSCHED_REPLICATION_FACTOR"] == "1"
    finally:
        stack.lock.close()


def test_sql_waits_for_a_restarted_workers_archiver_and_nothing_else(tmp_path: Path) -> None:
    """A restarted worker's ``/sql`` answers 503 while its archiver opens the archive (streams/web.py): the
    tests' queries right after a restart failed on it. Asked again until it answers; any other error is not."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    import pytest

    from ops.local_stack import LocalStack
    from streams.settings import Settings

    answers = [(503, {"error": "this worker's archiver is starting (opening the archive): try again"})] * 2 + [
        (200, {"columns": ["n"], "rows": [[7]]}), (503, {"error": "this worker has no archive"})]

    class Worker(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            code, body = answers.pop(0)
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(code)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stack = LocalStack(Settings(web_port=server.server_address[1]), tmp_path)
        assert stack.scalar("SELECT 7") == 7 and len(answers) == 1
        with pytest.raises(RuntimeError, match="503.*no archive"):
            stack.sql("SELECT 7")
    finally:
        server.shutdown()
