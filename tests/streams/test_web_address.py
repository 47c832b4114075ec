"""streams/web_address.py: the port file a worker leaves in its state directory."""

from __future__ import annotations

from pathlib import Path

from streams.web_address import PORT_FILE, advertise, advertised_port, withdraw


def test_advertise_read_and_withdraw(tmp_path: Path) -> None:
    assert advertised_port(tmp_path) is None
    advertise(tmp_path, 0)  # a worker without a web server says nothing
    assert advertised_port(tmp_path) is None
    advertise(tmp_path, 41234)
    assert advertised_port(tmp_path) == 41234
    withdraw(tmp_path, 50000)  # another worker's port: the file is not ours to remove
    assert advertised_port(tmp_path) == 41234
    withdraw(tmp_path, 41234)
    assert not (tmp_path / PORT_FILE).exists()
    (tmp_path / PORT_FILE).write_text("not a port\n")
    assert advertised_port(tmp_path) is None


def test_a_second_worker_neither_takes_nor_removes_a_running_ones_file(tmp_path: Path) -> None:
    """A second worker on the same state directory (which then fails to start) wrote its own port
    there, then removed the file: `semsched sql` no longer found the running worker and said one
    owned the archive (found by the ops review). The file names the process too."""
    import subprocess
    import sys

    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / PORT_FILE).write_text(f"41234 {running.pid}\n")  # the running worker's
        advertise(tmp_path, 41234)  # the second one, on the same port
        withdraw(tmp_path, 41234)
        assert (tmp_path / PORT_FILE).read_text() == f"41234 {running.pid}\n"
    finally:
        running.kill()
        running.wait()
    advertise(tmp_path, 45000)  # its worker gone: the file is free to take
    assert advertised_port(tmp_path) == 45000
    (tmp_path / PORT_FILE).write_text("41234\n")  # a file an older worker wrote: still read
    assert advertised_port(tmp_path) == 41234


def test_a_killed_workers_file_whose_pid_another_process_took_is_replaced(tmp_path: Path) -> None:
    """Found by review: the file of a worker killed with SIGKILL named a PID that another process then took;
    it counted as alive, the next worker never wrote its port, and the CLI asked the old one."""
    import os

    from streams.process_start import start_ticks

    me = os.getpid()
    (tmp_path / PORT_FILE).write_text(f"41111 {os.getppid()} {(start_ticks(os.getppid()) or 0) + 1}\n")  # not that process
    advertise(tmp_path, 52222)
    assert advertised_port(tmp_path) == 52222
    assert (tmp_path / PORT_FILE).read_text() == f"52222 {me} {start_ticks(me)}\n"
    (tmp_path / PORT_FILE).write_text(f"41111 {os.getppid()} {start_ticks(os.getppid())}\n")  # that very process
    advertise(tmp_path, 52223)
    assert advertised_port(tmp_path) == 41111
