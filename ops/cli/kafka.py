"""``semsched kafka start|stop|status``: manage the local single-node Kafka broker.

The main CLI mounts this with ``app.add_typer(kafka_app, name="kafka")``. The broker's
jars come from Maven Central (``ops/kafka/pom.xml``) and are cached in ``$SEMSCHED_KAFKA_LIB``
or ``~/.cache/semsched/kafka-<version>/lib``; its state lives in ``<state_dir>/kafka`` where
``state_dir`` is ``$SEMSCHED_STATE_DIR`` or ``.state``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ops.console import wide_console
from ops.kafka.broker import BrokerStatus, KafkaBroker, KafkaBrokerError
from ops.kafka.config import PropertiesError

__all__ = ["kafka_app", "default_data_dir"]

DEFAULT_PORT = 19092

kafka_app = typer.Typer(
    name="kafka",
    help="Run the local single-node Apache Kafka broker (KRaft, 127.0.0.1) for development.",
    no_args_is_help=True,
    add_completion=False,
)
console = wide_console()
err_console = wide_console(stderr=True)


def default_data_dir() -> Path:
    """``<state_dir>/kafka`` with ``state_dir`` = ``$SEMSCHED_STATE_DIR`` or ``.state``."""
    return Path(os.environ.get("SEMSCHED_STATE_DIR") or ".state") / "kafka"


PortOpt = Annotated[
    int,
    typer.Option("--port", "-p", envvar="SEMSCHED_KAFKA_PORT", min=1, max=65535,
                 help="PLAINTEXT client port on 127.0.0.1."),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        "-d",
        help="Broker state dir (config, KRaft logs, broker.log, broker.pid). "
        "Default: $SEMSCHED_STATE_DIR/kafka, or .state/kafka.",
        show_default=False,
    ),
]
ControllerPortOpt = Annotated[
    int | None,
    typer.Option("--controller-port", min=1, max=65535, help="KRaft controller port. Default: --port + 1.",
                 show_default=False),
]


def _broker(
    port: int, data_dir: Path | None, controller_port: int | None = None, lib_dir: Path | None = None
) -> KafkaBroker:
    data_dir = data_dir if data_dir is not None else default_data_dir()
    if data_dir.exists() and not data_dir.is_dir():
        raise typer.BadParameter(f"{data_dir} is a file, not a directory", param_hint="--data-dir")
    try:
        return KafkaBroker(port=port, data_dir=data_dir, lib_dir=lib_dir, controller_port=controller_port)
    except PropertiesError as e:
        raise typer.BadParameter(str(e), param_hint="--data-dir") from None
    except ValueError as e:  # the two ports the same, or the controller's (--port + 1) past 65535
        raise typer.BadParameter(str(e), param_hint="--controller-port" if controller_port else "--port") from None


def _status_table(status: BrokerStatus) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    state = "[green]running[/green]" if status.running else "[red]stopped[/red]"
    if status.running and not status.reachable:
        state = "[yellow]running, port not answering[/yellow]"
    elif not status.running and status.reachable:
        state = "[yellow]stopped (but the port is in use by another process)[/yellow]"
    table.add_row("state", state)
    table.add_row("pid", str(status.pid) if status.pid else "-")
    table.add_row("bootstrap", status.bootstrap)
    table.add_row("controller", f"127.0.0.1:{status.controller_port}")
    table.add_row("data dir", str(status.data_dir))
    table.add_row("log", str(status.log_file))
    return table


def _status_dict(status: BrokerStatus) -> dict[str, object]:
    return {
        "running": status.running,
        "pid": status.pid,
        "port": status.port,
        "controller_port": status.controller_port,
        "bootstrap": status.bootstrap,
        "reachable": status.reachable,
        "data_dir": str(status.data_dir),
        "log_file": str(status.log_file),
    }


@kafka_app.command("start")
def start(
    port: PortOpt = DEFAULT_PORT,
    data_dir: DataDirOpt = None,
    controller_port: ControllerPortOpt = None,
    lib_dir: Annotated[
        Path | None,
        typer.Option(
            "--lib-dir",
            envvar="SEMSCHED_KAFKA_LIB",
            help="Cached Kafka jar dir (resolved with Maven on first use). "
            "Default: ~/.cache/semsched/kafka-<version>/lib.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait until clients can fetch metadata.")] = 60,
) -> None:
    """Start the broker in the background (no-op if already running) and wait until it serves metadata.

    The first start resolves the Kafka jars with Maven (needs `mvn` and network once) and
    formats the KRaft storage; later starts take a few seconds.
    """
    broker = _broker(port, data_dir, controller_port, lib_dir)
    was_running = broker.is_running()
    t0 = time.monotonic()
    try:
        if not broker.jars_ready():
            with console.status(f"Resolving Kafka jars with Maven into {broker.lib_dir} ..."):
                broker.ensure_jars()
        with console.status(f"Starting Kafka on {broker.bootstrap} ..."):
            status = broker.start(timeout=timeout)
    except KafkaBrokerError as exc:
        err_console.print(Panel(Text(str(exc)), title="[red]kafka start failed[/red]", border_style="red", expand=False))
        raise typer.Exit(1) from exc
    verb = "already running" if was_running else f"started in {time.monotonic() - t0:.1f}s"
    console.print(f"[green]Kafka {verb}[/green] - bootstrap [bold]{status.bootstrap}[/bold]")
    console.print(_status_table(status))


@kafka_app.command("stop")
def stop(
    port: Annotated[
        int | None,
        typer.Option("--port", "-p", envvar="SEMSCHED_KAFKA_PORT", show_default=False, min=1, max=65535,
                     help="The port the data dir's broker listens on, as a check: another one is refused "
                          "(the broker stopped is the data dir's)."),
    ] = None,
    data_dir: DataDirOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait after SIGTERM before SIGKILL.")] = 20,
) -> None:
    """Stop the broker recorded in <data-dir>/broker.pid (SIGTERM, then SIGKILL). Safe if not running."""
    from ops.kafka.config import recorded_port

    directory = data_dir if data_dir is not None else default_data_dir()
    try:
        recorded = recorded_port(directory / "server.properties")
    except PropertiesError as e:
        raise typer.BadParameter(str(e), param_hint="--data-dir") from None
    if port is not None and recorded is not None and port != recorded:  # (found by review: --port was
        raise typer.BadParameter(  # accepted and unused, and the data dir's broker on another port was stopped)
            f"the broker of {directory} listens on port {recorded}, not {port}: `kafka stop` stops a data "
            "dir's broker; give that broker's --data-dir", param_hint="--port")  # fmt: skip
    broker = _broker(port or recorded or DEFAULT_PORT, data_dir)
    pid = broker.status().pid
    try:
        with console.status("Stopping Kafka ..."):
            stopped = broker.stop(timeout=timeout)
    except KafkaBrokerError as exc:  # another process's start or stop of this broker did not end
        err_console.print(f"[red]kafka stop failed:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    if stopped:
        console.print(f"[green]Kafka stopped[/green] (pid {pid}, data dir {escape(str(broker.data_dir))})")
    else:
        console.print(f"[yellow]Kafka is not running[/yellow] (data dir {escape(str(broker.data_dir))})")


@kafka_app.command("status")
def status(
    port: Annotated[
        int | None,
        typer.Option("--port", "-p", envvar="SEMSCHED_KAFKA_PORT", show_default=False, min=1, max=65535,
                     help="PLAINTEXT client port on 127.0.0.1 (default: the port the data dir's broker was "
                          f"started on, else {DEFAULT_PORT})."),
    ] = None,
    data_dir: DataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Show whether the broker is running, its PID and bootstrap string. Exit code 1 if stopped."""
    if port is None:
        from ops.kafka.config import recorded_port

        try:
            port = recorded_port((data_dir if data_dir is not None else default_data_dir()) / "server.properties")
        except PropertiesError as e:
            raise typer.BadParameter(str(e), param_hint="--data-dir") from None
    st = _broker(port if port is not None else DEFAULT_PORT, data_dir).status()
    if as_json:
        typer.echo(json.dumps(_status_dict(st)))
    else:
        console.print(_status_table(st))
    if not st.running:
        raise typer.Exit(1)


@kafka_app.command("jars")
def jars() -> None:
    """Resolve the broker's jars from Maven Central into the cached lib dir (idempotent)."""
    from ops.kafka import jars as kafka_jars

    t0 = time.time()
    try:  # (no broker: a bad server.properties in the default data dir stopped `make demo` here; review)
        lib = kafka_jars.ensure_jars(kafka_jars.default_lib_dir(), kafka_jars.KAFKA_POM)
    except KafkaBrokerError as e:
        err_console.print(f"[red]{escape(str(e))}[/]")
        raise typer.Exit(1) from None
    console.print(f"Kafka jars ready in {lib} ({time.time() - t0:.1f}s)")
