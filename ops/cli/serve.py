"""``semsched serve``: a Triton Inference Server with the learned policy's models."""

from __future__ import annotations

from pathlib import Path

import typer


def serve_command(
    model: Path = typer.Option(None, help="Model directory (default: $SEMSCHED_MODEL_DIR, else models/latest); "
                                          "a `latest` symlink is watched and new versions are served without a restart."),
    host: str = typer.Option("127.0.0.1", help="Address the three ports listen on: 127.0.0.1 for workers on this "
                                                "machine, 0.0.0.0 for every interface (a container, other hosts)."),
    grpc_port: int = typer.Option(8001, min=1, max=65535, help="gRPC port (the worker's SEMSCHED_TRITON_URL)."),
    http_port: int = typer.Option(8000, min=1, max=65535, help="HTTP port (/v2/health/ready)."),
    metrics_port: int = typer.Option(8002, min=1, max=65535, help="Prometheus metrics port."),
    device: str = typer.Option("auto", help="auto (cuda when torch sees a GPU), cpu or cuda."),
    watch: float = typer.Option(1.0, help="Seconds between checks of the model directory for a new version (each model's stub loads it in a thread beside its requests)."),
    duration: Path = typer.Option(None, help="Duration-model directory for the predictor model "
                                             "(default: models/duration/latest beside the model, when it exists)."),
    workspace: Path = typer.Option(None, help="Directory for the model repository and the Python backend; must not exist yet, and is kept after exit (default: a fresh /tmp dir, removed at exit)."),
) -> None:  # fmt: skip
    """Serve the policy, job_encoder and predictor models on Triton (PyTriton's tritonserver) until Ctrl-C."""
    import logging

    from inference.policy import default_model_dir
    from inference.serving.server import ServeOptions, serve

    model_dir = model if model is not None else default_model_dir()
    if not (model_dir / "config.json").is_file():
        typer.echo(f"error: no model in {model_dir} (config.json missing): train one with `semsched train` "
                   "or pass --model DIR", err=True)  # fmt: skip
        raise typer.Exit(2)
    if device not in ("auto", "cpu", "cuda"):
        raise typer.BadParameter("device must be auto, cpu or cuda")
    if duration is not None and not (duration / "config.json").is_file():
        typer.echo(f"error: no duration model in {duration} (config.json missing)", err=True)
        raise typer.Exit(2)
    if duration is not None:  # named: it must load (found by review: a corrupt one was served as NaN)
        from inference.duration.io import load_predictor

        try:
            load_predictor(duration)
        except Exception as e:  # noqa: BLE001 - JSON, torch and shape errors alike: one line
            typer.echo(f"error: the duration model in {duration} does not load: {type(e).__name__}: "
                       f"{str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}", err=True)  # fmt: skip
            raise typer.Exit(2) from None
    if workspace is not None and workspace.exists():
        typer.echo(f"error: --workspace {workspace} exists already (a workspace is kept after exit): "
                   "remove it or pass a new directory", err=True)  # fmt: skip
        raise typer.Exit(2)
    from ops.ports import port_free

    if not port_free(0, host):  # any port: whether this machine has the address at all
        typer.echo(f"error: --host {host}: not an address this machine can listen on", err=True)
        raise typer.Exit(2)
    named = {"grpc": grpc_port, "http": http_port, "metrics": metrics_port}
    if len(set(named.values())) < len(named):  # each would pass the check below alone (found by review)
        typer.echo("error: --grpc-port, --http-port and --metrics-port must differ: "
                   + ", ".join(f"{k} {v}" for k, v in named.items()), err=True)  # fmt: skip
        raise typer.Exit(2)
    taken = [f"--{name}-port {port}" for name, port in (("grpc", grpc_port), ("http", http_port),
                                                          ("metrics", metrics_port)) if not port_free(port, host)]
    if taken:  # tritonserver would fail to bind after the models loaded: say so before
        typer.echo(f"error: port in use: {', '.join(taken)} (another Triton server?); pick free ports", err=True)
        raise typer.Exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = ServeOptions(model_dir=model_dir, host=host, http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port,
                           device=device, watch_s=watch, workspace=workspace, duration_dir=duration)  # fmt: skip
    raise typer.Exit(serve(options))
