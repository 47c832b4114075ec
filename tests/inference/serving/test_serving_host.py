"""The server listens where it is told (127.0.0.1 by default, not every interface), keeps its
administrative endpoints closed, and says so when tritonserver dies."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest


def reachable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, port)) == 0


def test_the_default_server_listens_on_loopback_only(served) -> None:
    handle = served.handle
    for port in (handle.grpc_port, handle.http_port, handle.metrics_port):
        assert reachable("127.0.0.1", port)
        assert not reachable("127.0.0.2", port)  # another loopback address: reached only through 0.0.0.0


def test_only_health_metadata_and_inference_are_open_without_the_token(served) -> None:
    """As PyTriton kept it: the model-repository, statistics, trace and logging endpoints need a
    random token nobody is given (unloading a model is not a client's call); shared memory is
    open on this loopback server (tests/inference/serving/test_serving_shared_memory.py)."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(served.url)
    try:
        assert client.is_server_live() and client.is_model_ready("policy")
        assert client.get_model_metadata("policy").name == "policy"
        for call in (client.get_model_repository_index, lambda: client.unload_model("policy"),
                     client.get_inference_statistics):  # fmt: skip
            with pytest.raises(InferenceServerException, match="restricted"):
                call()
        assert client.is_model_ready("policy")
    finally:
        client.close()


def test_the_server_exits_1_when_tritonserver_dies(tmp_path) -> None:
    from serving_helpers import publish

    from inference.serving.process import group_members, start_server

    publish(tmp_path / "models", "v1", seed=0)
    handle = start_server(tmp_path / "models" / "latest", device="cpu", timeout_s=120)
    try:
        members = group_members(handle.pid)
        (triton,) = [p for p in members if Path(f"/proc/{p}/comm").read_text().strip() == "tritonserver"]
        stubs = [p for p in members if Path(f"/proc/{p}/comm").read_text().startswith("triton_python")]
        assert len(stubs) == 3  # one Python-backend stub per model
        os.kill(triton, signal.SIGKILL)
        assert handle.process.wait(30) == 1
        assert "exited with code -9" in handle.log_tail(400)  # (before or after the server saw its models ready)
    finally:
        handle.stop()
    assert group_members(handle.pid) == []
