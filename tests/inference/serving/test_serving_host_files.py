"""The files a server and its workers share on one host: the token file, and what a killed
``semsched serve`` leaves (its workspace, token file and stub regions), swept by the next one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from serving_helpers import dead_pid

from inference.serving.host_files import (
    pid_alive,
    read_token,
    remove_own_regions,
    remove_token,
    serve_prefix,
    sweep_dead_servers,
    token_path,
    write_token,
)
from inference.serving.server import ServeOptions, server_command


def test_the_extension_is_behind_its_own_token_and_the_token_file_is_this_users(tmp_path, monkeypatch):
    cmd = server_command(ServeOptions(model_dir=tmp_path, grpc_port=1), tmp_path, tmp_path, "t0k3n")
    groups = [a.split("=", 1)[1] for a in cmd if a.startswith("--grpc-restricted-protocol=")]
    assert groups[1] == "shared-memory:semsched-shm-token=t0k3n" and "shared-memory" not in groups[0]
    assert [a.split("=", 1)[1] for a in cmd if a.startswith("--http-restricted-api=")] == groups
    closed = server_command(ServeOptions(model_dir=tmp_path), tmp_path, tmp_path, None)
    assert "shared-memory:semsched-shm-token=" in " ".join(closed)  # a token nobody has

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    token = write_token(4242)
    path = token_path(4242)
    assert token and path.parent == tmp_path and oct(path.stat().st_mode & 0o777) == "0o600"
    assert path.read_text().split("\n")[1] == str(os.getpid())  # whose it is, for the sweep
    assert read_token("localhost:4242") == token and read_token("localhost:4243") is None
    path.chmod(0o644)  # readable by others: not trusted
    assert read_token("127.0.0.1:4242") is None
    path.chmod(0o600)
    remove_token(4242, "another server's")
    assert path.exists()
    remove_token(4242, token)
    assert not path.exists()
    # a running server's token file is not taken by a second server on its port (which will not bind)
    path.write_text(f"theirs\n{os.getppid()}\n")
    path.chmod(0o600)
    assert write_token(4242) is None and read_token("localhost:4242") == "theirs"
    path.write_text(f"theirs\n{dead_pid()}\n")  # a dead server's is replaced
    assert write_token(4242) not in (None, "theirs") and read_token("localhost:4242") != "theirs"


def test_the_stubs_regions_carry_the_serve_process_pid(tmp_path):
    cmd = server_command(ServeOptions(model_dir=tmp_path), tmp_path, tmp_path, "t0k3n")
    assert f"--backend-config=python,shm-region-prefix-name=semsched-triton-{os.getpid()}-" in cmd


def test_only_what_dead_servers_left_is_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tmp, shm = tmp_path / "tmp", tmp_path / "shm"
    tmp.mkdir(), shm.mkdir()
    dead, alive = dead_pid(), os.getppid()
    assert not pid_alive(dead) and pid_alive(alive) and pid_alive(1)

    def leave(pid: int) -> list[Path]:
        workspace = tmp / f"{serve_prefix(pid)}abc123"
        (workspace / "ws" / "models").mkdir(parents=True)
        region = shm / f"{serve_prefix(pid)}80ca6d7f-97c5"
        region.write_bytes(b"\0" * 64)
        return [workspace, region]

    gone, running = leave(dead), leave(alive)
    mine = leave(os.getpid())  # this process's own: never swept (it is running)
    tokens = {pid: tmp / f"semsched-triton-{port}.token" for port, pid in ((4242, dead), (4243, alive))}
    for pid, path in tokens.items():
        path.write_text(f"tok3n\n{pid}\n")
    old_token = tmp / "semsched-triton-4244.token"
    old_token.write_text("tok3n")  # written before tokens carried a PID: whose is unknown, kept
    logs = tmp / "semsched-triton-log-abc123"  # a ServerHandle's log directory: not a server's
    logs.mkdir()
    others = [tmp / "semsched-42-0a1b", shm / "semsched-42-0a1b"]  # (a worker's region name: not swept here)
    for path in others:
        path.write_text("")

    removed = sweep_dead_servers(tmp, shm)
    assert sorted(removed) == sorted([*gone, tokens[dead]])
    assert not any(p.exists() for p in removed)
    assert all(p.exists() for p in [*running, *mine, tokens[alive], old_token, logs, *others])
    assert sweep_dead_servers(tmp, shm) == []


def test_a_server_removes_the_regions_its_stubs_left(tmp_path):
    own = tmp_path / f"{serve_prefix()}80ca6d7f"
    other = tmp_path / f"{serve_prefix(os.getppid())}80ca6d7f"
    own.write_bytes(b"\0"), other.write_bytes(b"\0")
    assert remove_own_regions(tmp_path) == [own]
    assert not own.exists() and other.exists()


def test_a_tritonserver_that_cannot_start_is_one_line_and_exit_2(tmp_path, monkeypatch, caplog):
    """Found by review: a Python version the wheel has no stub for (ImportError) or a binary that cannot run
    (OSError) came out of `semsched serve` as a traceback."""
    import threading

    from serving_helpers import publish

    import inference.serving.server as server

    def no_stub(workspace):  # noqa: ANN001, ANN202
        raise ImportError("the nvidia-pytriton wheel has no Python-backend stub for Python 3.99")

    monkeypatch.setattr(server, "backend_directory", no_stub)
    latest = publish(tmp_path / "models", "v1", seed=0)
    workspace = tmp_path / "ws"
    codes: list[int] = []
    with caplog.at_level("ERROR", logger="semsched.serving"):  # (in a thread: serve() installs no signal handlers)
        t = threading.Thread(target=lambda: codes.append(server.serve(server.ServeOptions(
            model_dir=latest, workspace=workspace, grpc_port=1), threading.Event())))  # fmt: skip
        t.start()
        t.join(60)
    assert codes == [2] and "cannot start tritonserver: ImportError: the nvidia-pytriton wheel" in caplog.text


def test_a_second_ctrl_c_kills_tritonserver_without_waiting_for_its_shutdown() -> None:
    """Found by review: a second Ctrl-C during ``semsched serve``'s shutdown (up to 15 s of tritonserver
    unloading its models) did nothing. Here a process that ignores SIGTERM stands for a slow shutdown."""
    import subprocess
    import sys
    import threading
    import time

    from inference.serving.server import again, stop_process

    stubborn = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ready', flush=True); time.sleep(60)"]  # fmt: skip
    stop, now = threading.Event(), threading.Event()
    again(stop, now)  # the first: stop the server, not now
    assert stop.is_set() and not now.is_set()
    process = subprocess.Popen(stubborn, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    threading.Timer(0.5, again, (stop, now)).start()  # the second, half a second into the shutdown
    t0 = time.monotonic()
    stop_process(process, now, timeout_s=30.0)
    assert process.returncode == -9 and time.monotonic() - t0 < 10
    process = subprocess.Popen(stubborn, stdout=subprocess.PIPE)  # without it: SIGKILL after the timeout
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    t0 = time.monotonic()
    stop_process(process, threading.Event(), timeout_s=1.0)
    assert process.returncode == -9 and 1.0 <= time.monotonic() - t0 < 10
