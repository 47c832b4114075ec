"""``semsched``: the one command-line entry point (typer). Every command has ``--help``."""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path

import typer

from ops.cli.bench import bench_app
from ops.cli.db import db_app, explain_command, sql_command
from ops.cli.kafka import kafka_app
from ops.cli.models import models_app
from ops.cli.options import positive
from ops.cli.replay import replay_command
from ops.cli.serve import serve_command
from ops.cli.train import train as train_command
from ops.cli.train_dag import train_dag as train_dag_command
from ops.cli.train_duration import train_duration as train_duration_command
from streams.settings import Settings, SettingsError

app = typer.Typer(
    help="semsched: an event-streaming control plane for cluster scheduling "
    "(Kafka + Faust + ClickHouse + Triton). Settings come from SEMSCHED_* environment variables.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(kafka_app, name="kafka", help="Run the local Apache Kafka broker (KRaft, jars via Maven).")
app.add_typer(db_app, name="db", help="The ClickHouse archive: migrations.")
app.add_typer(bench_app, name="bench", help="Benchmarks that print numbers.")
app.command("replay")(replay_command)
app.command("sql")(sql_command)
app.command("explain")(explain_command)
app.command("train")(train_command)
app.command("train-duration")(train_duration_command)
app.command("train-dag")(train_dag_command)
app.command("serve")(serve_command)
app.add_typer(models_app, name="models", help="Model versions: the registry (model_versions) and promotion.")


@app.command()
def schema(out: Path = typer.Option(Path("schemas"), help="Directory for one JSON Schema file per topic.")) -> None:
    """Write the JSON Schema of every topic's events, for producers."""
    from scheduling.events import json_schemas

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise typer.BadParameter(f"--out {out}: {e.strerror or e}") from None
    for topic, sch in json_schemas().items():
        path = out / f"{topic}.schema.json"
        path.write_text(json.dumps(sch, indent=2) + "\n")
        typer.echo(f"wrote {path}")


@app.command()
def worker(
    policy: str = typer.Option(None, help="Scheduling policy (default SEMSCHED_POLICY or best-fit)."),
    step: float = typer.Option(None, help="Seconds between scheduling steps (default SEMSCHED_STEP or 1).",
                               callback=positive),
    web_port: int = typer.Option(None, min=0, max=65535, help="Port of the status/sql web server on 127.0.0.1 (0 = off)."),
    no_archive: bool = typer.Option(False, "--no-archive", help="Do not run the ClickHouse archiver in this worker."),
    loglevel: str = typer.Option("warning", help="Faust log level."),
) -> None:
    """Run a Faust worker: ingest, cluster-state tables, the scheduling loop and the archiver."""
    from ops.cli.options import policy_names
    from streams.worker import run_worker

    s = Settings()
    upd = {k: v for k, v in {"policy": policy, "step_s": step, "web_port": web_port}.items() if v is not None}
    s = s.model_copy(update=upd)
    policy_names(s.policy)
    from inference.policy import uses_learned

    if uses_learned(s.policy):  # a typo must not turn into fallback decisions
        from inference.backends import check_environment

        try:
            check_environment()
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    run_worker(s, archive=not no_archive, loglevel=loglevel)


@app.command()
def agents(
    speed: float = typer.Option(1.0, help="Run each job for its trace duration divided by this.", callback=positive),
    default_duration: float = typer.Option(60.0, help="Seconds a job without a trace duration runs (before speed).",
                                           min=0.0),
    max_duration: float = typer.Option(None, help="Cap on a job's trace duration, seconds (before speed).", min=0.0),
    telemetry: float = typer.Option(5.0, help="Seconds between telemetry reports of changed nodes.", callback=positive),
    fail_rate: float = typer.Option(0.0, help="Share of jobs that fail half-way (to exercise retries).", min=0.0,
                                    max=1.0),
    seed: int = typer.Option(0, help="Seed of the failure injection."),
) -> None:
    """Run simulated cluster agents: execute placement commands, report lifecycle and telemetry."""
    from ops.agents.simulated import run_agents

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run_agents(Settings(), speed=speed, default_duration_s=default_duration, max_duration_s=max_duration,
               telemetry_s=telemetry, fail_rate=fail_rate, seed=seed)  # fmt: skip


@app.command()
def demo(
    jobs: int = typer.Option(8152, min=1, help="Pods to replay from the openb trace (8,152 = all of them)."),
    speed: float = typer.Option(100_000.0, help="Replay speed-up (arrivals and run times): the trace's "
                                "149 days pass in about 130 s."),
    start_offset: float = typer.Option(0, help="Trace second from which pods are taken."),
    max_gap: float = typer.Option(None, min=0.0, help="Cap any single wait between submissions at this many seconds "
                                  "(after --speed): squeezes the trace's idle stretches.", show_default=False),
    policy: str = typer.Option("best-fit", help="Scheduling policy."),
    port: int = typer.Option(19092, min=1, max=65535, help="Port of the local Kafka broker."),
    timeout: float = typer.Option(900, callback=positive,  # (nan started the whole stack, then gave up at once)
                                  help="Give up waiting for the jobs after this many seconds."),
    inference: str = typer.Option("in-process", help="Where the learned policy's model runs: in-process, or "
                                  "triton (the demo starts `semsched serve` and the worker calls it)."),
    model: Path = typer.Option(None, help="Model directory for the learned policy (default: models/latest, "
                               "written by `semsched train`)."),
) -> None:
    """The main job, end to end on one machine: broker, worker, agents, a replay of the openb trace,
    then a reconciled summary from ClickHouse. Exits non-zero if any job is lost, or placed, started or
    run twice, or run after it was done, or the trace had bad lines.
    ``--policy learned --inference triton`` runs the learned policy served by Triton."""
    from ops.cli.options import policy_names
    from ops.demo import run_demo

    policy_names(policy)  # an unknown policy stops here, before the demo wipes its state directory

    raise typer.Exit(run_demo(jobs=jobs, speed=speed, start_offset=start_offset, policy=policy, port=port,
                              timeout_s=timeout, inference=inference, model_dir=model, max_gap_s=max_gap))  # fmt: skip


def one_line_summaries(group: typer.Typer) -> None:
    """Give every command of ``group`` (and of its sub-groups) a command-list summary: its help's
    first paragraph as one line. Typer's rich mode keeps a docstring's line breaks there, which
    wrapped the list raggedly; a command's own ``--help`` re-wraps its text and is unchanged."""
    for info in group.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None) or ""
        if info.short_help is None and doc:
            info.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            one_line_summaries(sub.typer_instance)


one_line_summaries(app)


def main() -> None:
    """The ``semsched`` console script: :data:`app`, with a ``SEMSCHED_*`` variable that cannot be
    read (a number that is not one, an unknown fallback policy) as a one-line error, exit 2, and a
    report directory that cannot be written as one line, exit 1."""
    from pydantic import ValidationError

    from ops.reports.report import ReportError

    try:
        app()
    except ReportError as e:  # a benchmark's output directory
        typer.echo(f"semsched: {e}", err=True)
        raise SystemExit(1) from None
    except SettingsError as e:
        typer.echo(f"semsched: {e}", err=True)
        raise SystemExit(2) from None
    except ValidationError as e:
        if e.title != Settings.__name__:
            raise
        for error in e.errors():
            typer.echo(f"semsched: {str(error['msg']).removeprefix('Value error, ')}", err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
