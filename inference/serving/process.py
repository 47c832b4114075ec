"""Run the Triton server as a subprocess and wait until its models are ready (tests, demo, bench).

``start_server(model_dir)`` starts ``python -m inference.serving.server`` in its own session
(so that it and its tritonserver child form one process group), waits until
``is_model_ready`` answers for the three models and its HTTP and metrics endpoints answer too
(tritonserver exits if one of their ports is taken), and returns a :class:`ServerHandle`. A port
it picked that another process took before tritonserver bound it is picked again.
``handle.stop()`` sends SIGTERM to that PID (the server stops tritonserver and removes its
workspace), then, if it has not exited within ``grace_s``, SIGKILLs its process group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from inference.serving.host_files import serve_prefix
from inference.serving.server import die_with_parent, prepare_environment, wait_http_endpoints, wait_ready

log = logging.getLogger("semsched.serving")

PORT_TRIES = 3
#: tritonserver's words when a port is taken ("failed to start HTTP service: Unavailable - Socket
#: '127.0.0.1:49093' already in use")
_PORT_IN_USE = re.compile(r"Socket '[^']*:(\d+)' already in use")


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: all bound at once, so the OS cannot hand the same one out twice
    (one at a time, it did: tritonserver then refused HTTP and gRPC on the same port)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def group_members(pgid: int) -> list[int]:
    """PIDs of the live (not zombie) processes of process group ``pgid`` (from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


@dataclass
class ServerHandle:
    process: subprocess.Popen[bytes]
    grpc_port: int
    http_port: int
    metrics_port: int
    log_path: Path
    scratch: Path | None = None  # removed on stop (the default log's directory)
    stopped: bool = field(default=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        """The gRPC endpoint (``host:port``), as ``SEMSCHED_TRITON_URL`` takes it."""
        return f"127.0.0.1:{self.grpc_port}"

    def log_tail(self, lines: int = 30, since: int = 0) -> str:
        """The log's last ``lines`` lines after byte ``since`` (a start's own, in a log a retry appends to)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace_s: float = 15.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL to its process group); returns its exit code."""
        if self.stopped:
            return self.process.returncode
        self.stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace_s)
        if group_members(self.process.pid):  # what is left of its group (tritonserver, the backend stubs)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(5)
        deadline = time.monotonic() + 5
        while group_members(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_server(model_dir: Path, *, grpc_port: int | None = None, http_port: int | None = None,
                 metrics_port: int | None = None, device: str = "cpu", watch_s: float = 0.5,
                 duration_dir: Path | None = None, timeout_s: float = 120.0,
                 log_path: Path | None = None, threads: int | None = None) -> ServerHandle:  # fmt: skip
    """Start a Triton server for ``model_dir`` in a subprocess; returns once its models are ready.
    Ports not given are picked free; one of those taken by another process between the pick and
    tritonserver's bind is picked again (up to :data:`PORT_TRIES` starts, each within ``timeout_s``): a given
    port in use fails at once."""
    prepare_environment()  # the child inherits LD_LIBRARY_PATH with libpython first
    given = (grpc_port, http_port, metrics_port)
    scratch = None
    if log_path is None:
        # (named for this process: what a killed one leaves, the next server's start sweeps)
        scratch = Path(tempfile.mkdtemp(prefix=f"{serve_prefix()}log-", dir="/tmp"))
        log_path = scratch / "server.log"
    extra = ["--device", device, "--watch", str(watch_s)]
    if duration_dir is not None:
        extra += ["--duration-dir", str(duration_dir)]
    if threads is not None:
        extra += ["--threads", str(threads)]
    try:
        for attempt in range(1, PORT_TRIES + 1):
            spare = iter(free_ports(3))
            ports = [p or next(spare) for p in given]
            try:
                return _start_once(model_dir, ports, extra, log_path, scratch, timeout_s, append=attempt > 1)
            except PortInUse as e:
                if e.port in given or attempt == PORT_TRIES:
                    raise
                log.warning("Triton server: port %d was taken before tritonserver bound it; starting again on "
                            "others", e.port)  # fmt: skip
        raise AssertionError("unreachable")
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise


class PortInUse(RuntimeError):
    """tritonserver could not bind ``port``: another process holds it."""

    def __init__(self, message: str, port: int) -> None:
        super().__init__(message)
        self.port = port


def _start_once(model_dir: Path, ports: list[int], extra: list[str], log_path: Path, scratch: Path | None,
                timeout_s: float, *, append: bool) -> ServerHandle:  # fmt: skip
    instance = secrets.token_hex(8)  # (another Triton on a port answers too: only this one's models carry it)
    cmd = [sys.executable, "-m", "inference.serving.server", "--model-dir", str(model_dir), "--instance", instance,
           "--grpc-port", str(ports[0]), "--http-port", str(ports[1]), "--metrics-port", str(ports[2]), *extra]  # fmt: skip
    with open(log_path, "ab" if append else "wb") as out:  # (a retry keeps the failed start's log above its own)
        start = out.tell()  # where this start's log begins: an earlier start's lines are not its failure
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=os.environ.copy(), preexec_fn=die_with_parent)  # fmt: skip
    handle = ServerHandle(process, ports[0], ports[1], ports[2], log_path, scratch)
    try:
        deadline = time.monotonic() + timeout_s
        wait_ready(handle.url, timeout_s, process, instance=instance)
        wait_http_endpoints("127.0.0.1", ports[1], ports[2], max(10.0, deadline - time.monotonic()), process, instance)
    except KeyboardInterrupt:  # Ctrl-C while the models load: an interruption, not a failure of the server
        handle.stop()
        raise
    except BaseException as e:
        handle.scratch = None  # (a retry writes its log there too: start_server removes it if none starts)
        handle.stop()
        own = handle.log_tail(10**9, since=start)
        message = f"{e}; the server's log ended with:\n{handle.log_tail(30, since=start)}"
        if taken := [int(p) for p in _PORT_IN_USE.findall(own) if int(p) in ports]:
            raise PortInUse(message, taken[-1]) from e
        raise RuntimeError(message) from e
    return handle
