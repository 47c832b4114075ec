"""Run a real Triton Inference Server (PyTriton's tritonserver) with semsched's three models.

``serve(options)`` starts it in this process's foreground (``semsched serve``; the
tritonserver binary is PyTriton's child process, the models' Python callables run here) and
blocks until SIGINT / SIGTERM. ``python -m inference.serving.server --model-dir ...`` does the
same; :mod:`inference.serving.process` runs that as a subprocess for tests, the demo and
the benchmarks.

Models (see :mod:`inference.serving.models`): ``policy``, ``job_encoder`` and ``predictor``,
each with dynamic batching (200 µs queue delay). One version per name; the weights are
swapped in place when ``model_dir`` (the ``models/latest`` symlink) moves, and every answer
names its version (``VERSION``).

Setup this needs (done here): the Python backend's stub links the running interpreter's
libpython, so its directory goes first on ``LD_LIBRARY_PATH`` before tritonserver starts
(PyTriton passes this process's environment on); the workspace (unix sockets) gets a short,
fresh path under /tmp.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("semsched.serving")

MODEL_NAMES = ("policy", "job_encoder", "predictor")
QUEUE_DELAY_US = 200


@dataclass
class ServeOptions:
    model_dir: Path
    host: str = "127.0.0.1"  # the address all three ports listen on (0.0.0.0: every interface)
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    device: str = "auto"  # auto | cpu | cuda
    watch_s: float = 1.0  # how often the served version checks model_dir for a new version
    threads: int = 1  # torch intra-op threads (many tiny ops: more threads cost more than they give)
    workspace: Path | None = None  # PyTriton's sockets and model store; must not exist yet (default: /tmp)
    duration_dir: Path | None = None  # a trained duration predictor for the `predictor` model
    info: dict[str, Any] = field(default_factory=dict)


def prepare_environment() -> None:
    """Put this interpreter's libpython directory first on LD_LIBRARY_PATH (for the Python backend stub)."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    current = os.environ.get("LD_LIBRARY_PATH", "")
    if libdir and current.split(":")[0] != libdir:
        os.environ["LD_LIBRARY_PATH"] = f"{libdir}:{current}" if current else libdir


@dataclass
class ServingModels:
    """The three models' callables, on one :class:`~inference.serving.host.ModelHost` (one device)."""

    host: Any
    policy: Any
    encoder: Any
    predictor: Any

    def describe(self) -> dict[str, str]:
        """``{model: description}`` for the log and ``ServeOptions.info``: each says where it runs."""
        host = self.host
        return {"policy": f"{host.version} (outputs {', '.join(self.policy.outputs)}, torch on {host.device})",
                "job_encoder": f"{host.version} (encoder {self.encoder.encoder_name} on {self.encoder.device})",
                "predictor": self.predictor.describe()}  # fmt: skip


def make_models(options: ServeOptions, device: str) -> ServingModels:
    """The ``policy``, ``job_encoder`` and ``predictor`` callables of ``options.model_dir``, every
    torch part on ``device`` (:func:`~inference.serving.host.pick_device`'s answer), new versions too."""
    from inference.serving.host import ModelHost
    from inference.serving.models import JobEncoderModel, PolicyModel
    from inference.serving.predictor import PredictorModel

    host = ModelHost(options.model_dir, watch_s=options.watch_s, device=device)
    return ServingModels(host, PolicyModel(host), JobEncoderModel(host, device),
                         PredictorModel(host, options.duration_dir))  # fmt: skip


def bind_models(triton: Any, options: ServeOptions, device: str) -> dict[str, str]:
    """Bind the three models (:func:`make_models`) on ``triton``; returns ``{model: description}`` for the log."""
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

    from inference.serving.models import POLICY_INPUTS

    models = make_models(options, device)

    def config(max_batch: int) -> Any:
        return ModelConfig(max_batch_size=max_batch, batcher=DynamicBatcher(max_queue_delay_microseconds=QUEUE_DELAY_US))

    version = Tensor(name="VERSION", dtype=np.bytes_, shape=(1,))
    policy, encoder, predictor = models.policy, models.encoder, models.predictor
    triton.bind(model_name="policy", infer_func=policy,
                inputs=[Tensor(name=n, dtype=dt, shape=(-1,) * rank, optional=opt)
                        for n, (dt, rank, opt) in POLICY_INPUTS.items()],
                outputs=[*(Tensor(name=n, dtype=dt, shape=(-1,) * rank) for n, (dt, rank) in policy.outputs.items()),
                         version],
                config=config(4), strict=True)  # fmt: skip
    triton.bind(model_name="job_encoder", infer_func=encoder, inputs=[Tensor(name="TEXT", dtype=np.bytes_, shape=(1,))],
                outputs=[Tensor(name="EMBEDDING", dtype=np.float32, shape=(-1,)), version],
                config=config(256), strict=True)  # fmt: skip
    triton.bind(model_name="predictor", infer_func=predictor, inputs=predictor.inputs(), outputs=predictor.outputs(),
                config=config(256), strict=True)  # fmt: skip
    return models.describe()


def serve(options: ServeOptions, stop: threading.Event | None = None, on_ready: Any = None) -> int:
    """Start Triton with the models of ``options.model_dir`` and block until ``stop`` is set (or a
    SIGINT/SIGTERM, in the main thread) or the server dies. Returns an exit code."""
    prepare_environment()
    import torch
    from pytriton.triton import Triton, TritonConfig

    from inference.serving.host import pick_device

    torch.set_num_threads(max(1, options.threads))
    device = pick_device(options.device)
    scratch = None
    if options.workspace is None:
        scratch = Path(tempfile.mkdtemp(prefix="semsched-triton-", dir="/tmp"))
        workspace = scratch / "ws"
    else:
        workspace = options.workspace
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    config = TritonConfig(http_address=options.host, http_port=options.http_port, grpc_address=options.host,
                          grpc_port=options.grpc_port, metrics_address=options.host,
                          metrics_port=options.metrics_port, exit_timeout_secs=5)  # fmt: skip
    triton = Triton(config=config, workspace=str(workspace))
    code = 0
    try:
        described = bind_models(triton, options, device)
        triton.run()
        for name, text in described.items():
            log.info("model %-11s %s", name, text)
        log.info("triton ready on %s: grpc :%d, http :%d, metrics :%d; models from %s "
                 "(checked at requests, at most every %.1f s)", options.host, options.grpc_port, options.http_port,
                 options.metrics_port, options.model_dir, options.watch_s)  # fmt: skip
        options.info.update(described)
        if on_ready is not None:
            on_ready(described)
        while not stop.wait(0.5):
            if not triton.is_alive():
                log.error("tritonserver exited")
                code = 1
                break
    finally:
        triton.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return code


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
    return ServeOptions(**vars(p.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pytriton").setLevel(logging.WARNING)
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if not (options.model_dir / "config.json").exists():
        log.error("no model in %s (expected config.json and model.pt: run `semsched train`)", options.model_dir)
        return 2
    return serve(options)


if __name__ == "__main__":
    sys.exit(main())
