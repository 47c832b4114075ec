"""A port ``start_server`` picked, taken by another process before tritonserver binds it, is
picked again (inference/serving/process.py): a CI failure's kind (the Kafka broker's controller
port, 2026-12-04) that the Triton tests could meet too. A port the caller gave stays a failure."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving_helpers import publish

import inference.serving.process as process
from inference.serving.process import PortInUse, group_members, start_server

pytestmark = pytest.mark.integration  # its own real tritonserver (found by review: left out of -m integration)


@pytest.fixture
def busy() -> Iterator[int]:
    """A port another process's socket listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.fixture
def latest(tmp_path: Path) -> Path:
    publish(tmp_path / "models", "v1", seed=0)
    return tmp_path / "models" / "latest"


def test_a_picked_port_taken_before_the_bind_is_picked_again(monkeypatch, busy, latest, tmp_path) -> None:  # type: ignore[no-untyped-def]
    real, picks = process.free_ports, []

    def first_pick_busy(n: int) -> list[int]:
        ports = real(n)
        picks.append(ports if picks else [ports[0], busy, ports[2]])  # the HTTP port, as tritonserver met it
        return picks[-1]

    monkeypatch.setattr(process, "free_ports", first_pick_busy)
    with start_server(latest, log_path=tmp_path / "server.log", timeout_s=120) as handle:
        assert len(picks) == 2 and handle.http_port == picks[1][1] != busy
        log = (tmp_path / "server.log").read_text()
        assert f"127.0.0.1:{busy}' already in use" in log  # the first start's log is kept above the second's
    assert group_members(handle.pid) == []


def test_a_given_port_in_use_fails_at_once_and_leaves_nothing(monkeypatch, busy, latest) -> None:  # type: ignore[no-untyped-def]
    calls = []
    real = process.free_ports
    monkeypatch.setattr(process, "free_ports", lambda n: calls.append(n) or real(n))
    with pytest.raises(PortInUse, match="already in use") as e:
        start_server(latest, grpc_port=busy, timeout_s=120)
    assert e.value.port == busy and len(calls) == 1
    assert isinstance(e.value, RuntimeError)  # (callers that caught a failed start's RuntimeError still do)


def test_the_serve_command_never_calls_a_server_on_a_taken_port_ready(busy, latest) -> None:  # type: ignore[no-untyped-def]
    """``semsched serve``'s process: its models answered ready over gRPC just before tritonserver exited
    on the taken HTTP port, and it logged "triton ready" first."""
    import subprocess
    import sys

    from inference.serving.server import prepare_environment

    prepare_environment()
    grpc, metrics = process.free_ports(2)
    r = subprocess.run([sys.executable, "-m", "inference.serving.server", "--model-dir", str(latest), "--device",
                        "cpu", "--grpc-port", str(grpc), "--http-port", str(busy), "--metrics-port", str(metrics)],
                       capture_output=True, text=True, timeout=180)  # fmt: skip
    assert r.returncode == 1
    assert f"127.0.0.1:{busy}' already in use" in r.stdout + r.stderr and "triton ready" not in r.stderr


def test_another_triton_on_the_ports_is_not_taken_for_this_one(served, latest) -> None:  # type: ignore[no-untyped-def]
    """Another Triton (a second `semsched serve`) on the ports answered ready for the new server, which logged
    "triton ready" and then exited on the taken port (found by review): only a server whose models carry
    this start's instance parameter counts."""
    import subprocess
    import sys

    from inference.serving.server import prepare_environment, wait_http_endpoints, wait_ready

    a = served.handle
    prepare_environment()
    r = subprocess.run([sys.executable, "-m", "inference.serving.server", "--model-dir", str(latest), "--device", "cpu",
                        "--grpc-port", str(a.grpc_port), "--http-port", str(a.http_port),
                        "--metrics-port", str(a.metrics_port)], capture_output=True, text=True, timeout=180)  # fmt: skip
    assert r.returncode == 1 and f"127.0.0.1:{a.grpc_port}' already in use" in r.stdout + r.stderr
    assert "triton ready" not in r.stderr  # (semsched serve checks its ports first: ops/cli/serve.py)
    with pytest.raises(PortInUse) as e:  # given ports: at once, no other start
        start_server(latest, grpc_port=a.grpc_port, http_port=a.http_port, metrics_port=a.metrics_port, timeout_s=60)
    assert e.value.port == a.grpc_port
    # the instance check itself: the running server is not one of another instance
    assert wait_ready(a.url, 30) is True
    with pytest.raises(TimeoutError):
        wait_ready(a.url, 1.0, instance="not-this-one")
    with pytest.raises(TimeoutError):
        wait_http_endpoints("127.0.0.1", a.http_port, a.metrics_port, 1.0, a.process, "not-this-one")


def test_a_later_start_failing_otherwise_is_not_taken_for_a_taken_port(monkeypatch, busy, latest, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The log is appended to at a retry: the first start's "already in use" line was read as the second's
    failure, which was retried a third time and reported as a taken port (found by review)."""
    real, picks = process.free_ports, []

    def busy_then_broken(n: int) -> list[int]:
        ports = real(n)
        if picks:  # the second start: a model directory that no longer loads
            (latest / "config.json").unlink()
        picks.append(ports if picks else [ports[0], busy, ports[2]])
        return picks[-1]

    monkeypatch.setattr(process, "free_ports", busy_then_broken)
    with pytest.raises(RuntimeError) as e:
        start_server(latest, log_path=tmp_path / "server.log", timeout_s=120)
    assert not isinstance(e.value, PortInUse) and len(picks) == 2
    assert "already in use" not in str(e.value)  # the second start's own log only
