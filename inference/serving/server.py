"""Run a real Triton Inference Server (PyTriton's tritonserver) with semsched's three models.

``serve(options)`` writes a model repository (:mod:`inference.serving.repository`: ``policy``,
``job_encoder`` and ``predictor``, each with dynamic batching, 200 µs queue delay), starts the
``tritonserver`` binary that the ``nvidia-pytriton`` wheel ships, with that wheel's Python
backend, waits until the three models are ready, and blocks until SIGINT / SIGTERM (``semsched
serve``) or until the server dies. Each model runs in its own Python-backend stub process
(:mod:`inference.serving.python_model`), so a request goes client → tritonserver → stub and
back, with no third process (PyTriton's ``Triton.bind`` proxied every request on to this
process: ~2–4 ms more a call, ``semsched bench triton``). ``python -m inference.serving.server
--model-dir ...`` does the same; :mod:`inference.serving.process` runs that as a subprocess for
tests, the demo and the benchmarks.

One version per model name; the weights are swapped in place when ``model_dir`` (the
``models/latest`` symlink) moves (:class:`~inference.serving.host.ModelHost`, in each stub), and
every answer names its version (``VERSION``).

Setup this does: the stub links the running interpreter's libpython, so its directory goes first
on ``LD_LIBRARY_PATH`` with the wheel's own libraries; this interpreter's ``bin`` goes first on
``PATH`` and the project's root on ``PYTHONPATH`` (the stub then imports this environment's
packages and ``inference``); the workspace (the repository and the backend directory with the
stub for this Python version) is a fresh directory under /tmp. Endpoints other than health,
metadata and inference stay behind a random access token, as PyTriton kept them; the
shared-memory extension behind another, which this user's workers on this host read from
:func:`~inference.serving.host_files.token_path`. tritonserver gets SIGTERM when this process
dies (``PR_SET_PDEATHSIG``, as PyTriton set it). The workspace and the stubs' shared-memory
regions carry this process's PID, and each start removes those of killed servers
(:mod:`inference.serving.host_files`). A model's stub that dies stops the server with exit 1
(:mod:`inference.serving.stubs`): tritonserver would not start it again.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.serving.repository import MODEL_NAMES, write_repository
from inference.serving.stubs import dead, model_stubs

log = logging.getLogger("semsched.serving")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STUB_WATCH_S = 2.0  # how often the models' stubs are looked at (inference/serving/stubs.py)
#: what only an operator needs: behind a random token (no client of semsched uses them)
RESTRICTED = ("model-repository", "statistics", "trace", "logging")


@dataclass
class ServeOptions:
    model_dir: Path
    host: str = "127.0.0.1"  # the address all three ports listen on (0.0.0.0: every interface)
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    device: str = "auto"  # auto | cpu | cuda
    watch_s: float = 1.0  # how often the served version checks model_dir for a new version
    threads: int = 1  # torch intra-op threads per model (many tiny ops: more threads cost more than they give)
    workspace: Path | None = None  # the repository and the backend directory; must not exist yet (default: /tmp)
    duration_dir: Path | None = None  # a trained duration predictor for the `predictor` model
    ready_timeout_s: float = 300.0  # for the three models to load (three stubs import torch at once)
    instance: str = ""  # a parameter of the served models that tells this server from another (default: random)


def prepare_environment() -> None:
    """Put this interpreter's libpython directory first on LD_LIBRARY_PATH (for the Python backend stub)."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    current = os.environ.get("LD_LIBRARY_PATH", "")
    if libdir and current.split(":")[0] != libdir:
        os.environ["LD_LIBRARY_PATH"] = f"{libdir}:{current}" if current else libdir


@dataclass
class ServingModels:
    """The three models' callables on one :class:`~inference.serving.host.ModelHost` (one device), as
    the stubs build them one each (:func:`make_models`: for tests and checks in one process)."""

    host: Any
    policy: Any
    encoder: Any
    predictor: Any

    def describe(self) -> dict[str, str]:
        """``{model: description}``: each says where it runs (the stubs log the same lines)."""
        from inference.serving.python_model import describe

        return {kind: describe(kind, model) for kind, model in
                (("policy", self.policy), ("job_encoder", self.encoder), ("predictor", self.predictor))}  # fmt: skip


def make_models(options: ServeOptions, device: str) -> ServingModels:
    """The ``policy``, ``job_encoder`` and ``predictor`` callables of ``options.model_dir``, every
    torch part on ``device`` (:func:`~inference.serving.host.pick_device`'s answer), new versions too."""
    from inference.serving.host import ModelHost
    from inference.serving.python_model import make_model

    host = ModelHost(options.model_dir, watch_s=options.watch_s, device=device)
    return ServingModels(host, *(make_model(kind, host, device, options.duration_dir) for kind in MODEL_NAMES))


def again(stop: threading.Event, now: threading.Event) -> None:
    """A SIGINT / SIGTERM: the first stops the server, the next one kills tritonserver at once (found by
    review: a second Ctrl-C during the shutdown did nothing)."""
    if stop.is_set():
        if not now.is_set():
            log.warning("killing tritonserver now")
        now.set()
        return
    log.info("stopping: tritonserver unloads its models (Ctrl-C again to kill it now)")
    stop.set()


def stop_process(process: subprocess.Popen[Any], now: threading.Event, timeout_s: float) -> None:
    """SIGTERM ``process`` (tritonserver unloads the models, their stubs exit, within
    ``--exit-timeout-secs``); SIGKILL once ``timeout_s`` has passed or ``now`` is set."""
    process.terminate()
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline and not now.wait(0.1):
        pass
    if process.poll() is None:
        process.kill()
        process.wait(5)


def tritonserver_dist() -> tuple[Path, Path]:
    """``(tritonserver directory, its bundled libraries)`` from the ``nvidia-pytriton`` wheel
    (``ImportError`` without it)."""
    import pytriton

    root = Path(pytriton.__file__).resolve().parent
    return root / "tritonserver", root.parent / "nvidia_pytriton.libs"


def backend_directory(workspace: Path) -> Path:
    """``workspace/backends``: the wheel's Python backend with the stub for this Python version."""
    dist, _ = tritonserver_dist()
    python = workspace / "backends" / "python"
    python.mkdir(parents=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        (python / name).symlink_to(dist / "backends" / "python" / name)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stub = dist / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        raise ImportError(f"the nvidia-pytriton wheel has no Python-backend stub for Python {version}")
    (python / "triton_python_backend_stub").symlink_to(stub)
    return workspace / "backends"


def server_environment() -> dict[str, str]:
    """tritonserver's environment (module docstring): libpython and the wheel's libraries, this
    interpreter first on PATH, the project on PYTHONPATH."""
    prepare_environment()
    env = os.environ.copy()
    _, libs = tritonserver_dist()
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (env.get("LD_LIBRARY_PATH", ""), str(libs)) if p)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = ":".join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def server_command(options: ServeOptions, repository: Path, backends: Path, shm_token: str | None) -> list[str]:
    """tritonserver's arguments; ``shm_token`` opens the shared-memory extension to whoever sends it
    (None: to nobody)."""
    from inference.serving.host_files import TOKEN_KEY, serve_prefix

    dist, _ = tritonserver_dist()
    admin = f"{','.join(RESTRICTED)}:semsched-admin-token={secrets.token_urlsafe(24)}"
    shm = f"shared-memory:{TOKEN_KEY}={shm_token or secrets.token_urlsafe(24)}"
    return [str(dist / "bin" / "tritonserver"), f"--model-repository={repository}",
            f"--backend-directory={backends}", "--disable-auto-complete-config", "--exit-timeout-secs=5",
            f"--http-address={options.host}", f"--http-port={options.http_port}",
            f"--grpc-address={options.host}", f"--grpc-port={options.grpc_port}",
            f"--metrics-address={options.host}", f"--metrics-port={options.metrics_port}",
            f"--grpc-restricted-protocol={admin}", f"--http-restricted-api={admin}",
            f"--grpc-restricted-protocol={shm}", f"--http-restricted-api={shm}",
            f"--backend-config=python,shm-region-prefix-name={serve_prefix()}"]  # the stubs' regions: host_files


def wait_ready(url: str, timeout_s: float, process: subprocess.Popen[Any] | None = None,
               stop: threading.Event | None = None, instance: str | None = None) -> bool:  # fmt: skip
    """Until ``is_model_ready`` for every model (True) or ``stop`` is set (False); raises
    ``TimeoutError`` / ``RuntimeError``. With ``instance``, only a server whose models carry that
    parameter counts: another Triton on the port answered ready for ours (found by review)."""
    import tritonclient.grpc as grpcclient

    deadline = time.monotonic() + timeout_s
    client = grpcclient.InferenceServerClient(url)
    try:
        while True:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the Triton server exited with code {process.returncode}")
            try:
                if all(client.is_model_ready(name, client_timeout=2.0) for name in MODEL_NAMES) and (
                        instance is None or _grpc_instance(client) == instance):  # fmt: skip
                    return True
            except Exception:  # not listening yet
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Triton models at {url} were not ready within {timeout_s:.0f} s")
            if (stop or threading.Event()).wait(0.2):  # (a stop while the models load ends the wait)
                return False
    finally:
        client.close()


def _grpc_instance(client: Any) -> str:
    return str(client.get_model_config(MODEL_NAMES[0], client_timeout=2.0).config.parameters["instance"].string_value)


def wait_http_endpoints(host: str, http_port: int, metrics_port: int, timeout_s: float,
                        process: subprocess.Popen[Any], instance: str, stop: threading.Event | None = None) -> None:  # fmt: skip
    """Until this server's HTTP endpoint (its models' ``instance`` parameter) and the metrics endpoint
    answer; raises ``TimeoutError`` / ``RuntimeError``. tritonserver starts gRPC, then HTTP, then metrics,
    and exits if one of their ports is taken: its models answered ready over gRPC just before it exited on
    the HTTP port, and a dying server was called ready (found by tests/inference/serving/test_serving_ports.py)."""
    import json
    import urllib.request

    deadline = time.monotonic() + timeout_s
    host = f"[{host}]" if ":" in host else host  # (an IPv6 address)
    urls = [f"http://{host}:{http_port}/v2/models/{MODEL_NAMES[0]}/config", f"http://{host}:{metrics_port}/metrics"]
    while urls and not (stop is not None and stop.is_set()):  # (a SIGTERM meanwhile: stop now, review)
        if process.poll() is not None:
            raise RuntimeError(f"the Triton server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(urls[0], timeout=1.0) as answer:
                ours = answer.status == 200 and (urls[0].endswith("/metrics") or json.loads(answer.read())[
                    "parameters"]["instance"]["string_value"] == instance)  # fmt: skip
                if ours:
                    urls.pop(0)
                    continue
        except (OSError, ValueError, KeyError):  # not listening yet, or another process's socket or server
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{urls[0]} did not answer within {timeout_s:.0f} s")
        time.sleep(0.1)


def serve(options: ServeOptions, stop: threading.Event | None = None) -> int:
    """Start Triton with the models of ``options.model_dir`` and block until ``stop`` is set (or a
    SIGINT/SIGTERM, in the main thread) or the server dies. Returns an exit code."""
    from inference.model.io import load_model
    from inference.serving import host_files

    for path in host_files.sweep_dead_servers():
        log.info("removed %s, left by a semsched serve that was killed", path)
    scratch = None
    if options.workspace is None:
        scratch = Path(tempfile.mkdtemp(prefix=host_files.serve_prefix(), dir=tempfile.gettempdir()))
        workspace = scratch / "ws"
    else:
        workspace = options.workspace
    stop = stop or threading.Event()
    now = threading.Event()  # a second Ctrl-C: tritonserver is killed, not waited for
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: again(stop, now))
    process = None
    code = 0
    shm_token = host_files.write_token(options.grpc_port)
    if shm_token is None:
        log.warning("cannot write %s: workers send every tensor in the gRPC message",
                    host_files.token_path(options.grpc_port))  # fmt: skip
    try:
        try:  # what the command was given, checked before tritonserver starts: one line, not a traceback
            model = load_model(options.model_dir)
        except Exception as e:  # a config.json that does not parse, an unknown format, no weights
            log.error("the model at %s does not load: %s: %s", options.model_dir, type(e).__name__, e)
            return 2
        try:  # (after the model: a --workspace made for a model that does not load would be left behind)
            workspace.mkdir(parents=True)
        except OSError as e:
            log.error("cannot make the workspace %s: %s", workspace, e)
            return 2
        instance = options.instance or secrets.token_hex(8)  # tells this server's answers from another's
        parameters = {"model_dir": str(options.model_dir), "device": options.device, "watch_s": str(options.watch_s),
                      "threads": str(options.threads), "duration_dir": str(options.duration_dir or ""),
                      "instance": instance, "agreement_dir": str(workspace / "versions")}  # fmt: skip
        try:  # (found by review: a Python the wheel has no stub for, or a binary that cannot run: a traceback)
            repository = write_repository(workspace / "models", model, parameters)
            process = subprocess.Popen(server_command(options, repository, backend_directory(workspace), shm_token),
                                       env=server_environment(), preexec_fn=die_with_parent)  # fmt: skip
        except (ImportError, OSError) as e:
            log.error("cannot start tritonserver: %s: %s", type(e).__name__, e)
            return 2
        host = "127.0.0.1" if options.host == "0.0.0.0" else options.host
        t0 = time.monotonic()
        if not wait_ready(f"{host}:{options.grpc_port}", options.ready_timeout_s, process, stop, instance):
            return code  # stopped while the models loaded (the finally stops tritonserver)
        wait_http_endpoints(host, options.http_port, options.metrics_port,
                            max(10.0, options.ready_timeout_s - (time.monotonic() - t0)), process, instance, stop)  # fmt: skip
        log.info("triton ready on %s: grpc :%d, http :%d, metrics :%d; models from %s "
                 "(a new version looked for every %.1f s)", options.host, options.grpc_port, options.http_port,
                 options.metrics_port, options.model_dir, options.watch_s)  # fmt: skip
        stubs = model_stubs(process.pid)  # each model's stub: one that dies is not started again (stubs.py)
        if not stubs:
            log.warning("found none of the models' stubs under tritonserver (no /proc?): a stub that dies goes unnoticed")
        elif missing := [m for m in MODEL_NAMES if m not in stubs.values()]:
            # ready: every model's stub was started; one not there died before this look (found by a test that
            # killed one at once: it went unnoticed, only a warning)
            log.error("the %s model's stub died (not running under tritonserver once ready): tritonserver does not "
                      "start it again; stopping", ", ".join(missing))  # fmt: skip
            return 1
        looked = time.monotonic()
        while not stop.wait(0.5):
            if process.poll() is not None:
                log.error("tritonserver exited with code %s", process.returncode)
                code = 1
                break
            if time.monotonic() - looked >= STUB_WATCH_S:
                looked = time.monotonic()
                if gone := dead(stubs):
                    log.error("the %s model's stub (pid %s) died: tritonserver does not start it again, so every "
                              "request to it would fail while the server looks ready; stopping (start semsched "
                              "serve again, or let its supervisor)", ", ".join(m for _, m in gone),
                              ", ".join(str(p) for p, _ in gone))  # fmt: skip
                    code = 1
                    break
    except (RuntimeError, TimeoutError) as e:
        log.error("%s", e)
        code = 1
    finally:
        if process is not None and process.poll() is None:
            stop_process(process, now, 15.0)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        for path in host_files.remove_own_regions():  # a stub that died with tritonserver could not
            log.info("removed %s, a stub's region", path)
        if shm_token is not None:
            host_files.remove_token(options.grpc_port, shm_token)
    return code


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when this process dies (Linux; elsewhere nothing). (``ops.processes``
    has its twin: this package does not import ``ops``, and ``ops.processes`` stays free of torch.)
    libc's prctl is resolved in the parent: the child makes one C call."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _resolve_prctl() -> Any:
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _resolve_prctl()


def parse_args(argv: list[str]) -> ServeOptions:
    p = argparse.ArgumentParser(prog="python -m inference.serving.server", description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--watch", type=float, default=1.0, dest="watch_s")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workspace", type=Path, default=None)
    p.add_argument("--duration-dir", type=Path, default=None)
    p.add_argument("--instance", default="", help="the models' instance parameter (default: random)")
    return ServeOptions(**vars(p.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if not (options.model_dir / "config.json").exists():
        log.error("no model in %s (expected config.json and model.pt: run `semsched train`)", options.model_dir)
        return 2
    return serve(options)


if __name__ == "__main__":
    sys.exit(main())
