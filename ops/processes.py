"""Child processes of semsched (worker, agents): started detached with their own log file
and PID file, stopped by PID — the same way by the demo, the benchmarks and the tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.process_start import start_ticks  # (one definition: the worker's port file reads it too)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log_path: Path
    pid_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal the process group, wait, then SIGKILL. Returns the exit code."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.pid_path.unlink(missing_ok=True)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL, no goodbye: what a crash looks like."""
        self.stop(timeout=5, sig=signal.SIGKILL)

    def cpu_seconds(self) -> tuple[float, float] | None:
        """CPU time used so far (user + system, s): the whole process, and its main thread (a
        worker's event loop, where Faust, the streams and the scheduling steps run). From
        ``/proc``; None where there is none or the process is gone."""
        return cpu_seconds(self.pid)


def cpu_seconds(pid: int) -> tuple[float, float] | None:
    """(process, main thread) CPU seconds of ``pid`` (:meth:`Child.cpu_seconds`)."""

    def used(stat: Path) -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state is fields[0]
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    try:  # the main thread first: read after it, the process's count (its threads' sum) is never below it
        # (found flaky: read the other way round while the thread ran, the thread came out a tick ahead)
        main = used(Path(f"/proc/{pid}/task/{pid}/stat"))
        return used(Path(f"/proc/{pid}/stat")), main
    except (OSError, IndexError, ValueError):
        return None


def _prctl() -> Any:
    """libc's prctl, resolved here in the parent: a child forked from a process with threads may
    only make plain C calls before exec (no import, no dlopen)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _prctl()


def die_with_parent() -> None:
    """In a child before exec: SIGTERM when the process that started it dies, however it dies (Linux's
    PR_SET_PDEATHSIG; elsewhere nothing). A demo or a benchmark killed with SIGKILL then leaves no
    worker, agents, broker or Triton server running on its own (found by the ops review: they did,
    writing ~40 KB/s of connection errors once the broker was gone). The signal comes when the
    THREAD that started the child ends: start children from the main thread."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def write_pid_file(path: Path, pid: int) -> None:
    """``<pid> <start ticks>``: what :func:`live_pid` checks."""
    path.write_text(f"{pid} {start_ticks(pid) or 0}\n")


def live_pid(path: Path) -> int | None:
    """The PID a :func:`write_pid_file` file names when that very process still runs, else None. A file
    of the earlier format (the PID alone) counts when that PID runs semsched (its command line says so)."""
    try:
        fields = [int(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return None
    if len(fields) == 1:
        try:
            cmdline = Path(f"/proc/{fields[0]}/cmdline").read_bytes()
        except OSError:
            return None
        ours = b"ops.cli.main" in cmdline or b"inference.serving.server" in cmdline
        return fields[0] if ours and start_ticks(fields[0]) is not None else None
    pid, ticks = fields[:2]
    return pid if ticks and start_ticks(pid) == ticks else None


def spawn_semsched(name: str, args: list[str], *, env: dict[str, str], run_dir: Path) -> Child:
    """Start ``semsched <args>`` (this interpreter) as a process-group leader that dies with this process."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / f"{name}.log"
    pid_path = run_dir / f"{name}.pid"
    full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli.main", *args], env=full_env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, cwd=Path(__file__).resolve().parent.parent,
            preexec_fn=die_with_parent,
        )  # fmt: skip
    write_pid_file(pid_path, proc.pid)
    return Child(name, proc, log_path, pid_path)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt, so ``finally`` blocks stop the children.
    Without it, ``kill`` or ``timeout`` ends the parent at once and leaves its children
    (own sessions, so the signal does not reach them) running."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def wait_for(predicate, timeout: float, interval: float = 0.5, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
