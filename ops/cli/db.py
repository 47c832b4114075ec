"""``semsched db migrate``, ``semsched sql`` and ``semsched explain``: the archive from a shell.

Embedded mode (chdb) allows one process per data directory. While a worker runs it owns
the directory and serves read-only SQL at ``POST http://127.0.0.1:<web_port>/sql`` (body:
the query; answer: ``{"columns": [...], "rows": [...]}``). ``sql`` and ``explain`` try that
endpoint first (each waits ``--timeout``, 60 s, for a busy worker's answer to each query) and fall back to opening ``Settings().clickhouse_dsn`` themselves when no worker
answers. With a ClickHouse server DSN the same applies: the
worker answers if it runs, else the CLI talks to the server directly.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from ops.console import wide_console
from storage.client import ArchiveClient, chdb_path, get_client, held_by_another_process, redacted
from storage.json_cells import json_cell, text_cell
from storage.migrate import behind, migrate
from storage.queries import explain, job_clusters, run_sql
from streams.settings import Settings
from streams.web_address import advertised_port

__all__ = ["WorkerBusy", "WorkerSqlClient", "db_app", "explain_command", "open_archive", "query_via_worker",
           "running_worker", "sql_command"]

db_app = typer.Typer(help="The ClickHouse archive: schema migrations.", no_args_is_help=True)
console = wide_console()
err_console = wide_console(stderr=True)  # errors: not into a `sql ... > out.csv` (found by review)

Rows = tuple[list[str], list[tuple[Any, ...]]]


class WorkerUnavailable(RuntimeError):
    """No worker answered on the web port (connection refused, not a worker, another archive)."""


class WorkerBusy(RuntimeError):
    """A worker took the query and did not answer within the timeout: it owns the archive, so
    opening the directory instead would only meet its lock."""


def open_archive(dsn: str, *, create: bool = False) -> ArchiveClient:
    """A direct client on ``dsn``, migrated; when it cannot be opened, the reason in one line and
    exit 1. An embedded archive that does not exist is created only with ``create`` (recording
    something there): a read would find it empty, and a mistyped ``SEMSCHED_STATE_DIR`` would
    leave an empty archive behind."""
    if dsn.startswith("chdb://") and not create:
        try:
            path = chdb_path(dsn)
        except ValueError as e:
            _archive_unavailable(str(e))
        if path != ":memory:" and not Path(path).exists():
            _archive_unavailable(f"no archive at {path}: nothing has been recorded there (check "
                                 "SEMSCHED_STATE_DIR or SEMSCHED_CLICKHOUSE_URL; the worker creates it)")  # fmt: skip
        if path != ":memory:" and not Path(path).is_dir():  # (found by review: 18 lines of ClickHouse's stack)
            _archive_unavailable(f"{path} is not a directory, so not an embedded archive (check SEMSCHED_STATE_DIR)")
    # asked before this process opens it: its own session holds the lock afterwards, failed or not (found by
    # review: every failure was blamed on "a running worker")
    held = held_by_another_process(dsn)
    try:
        client = get_client(dsn)
        if create or behind(client):  # (a read of an up-to-date archive writes nothing: a read-only account can)
            migrate(client)
    except Exception as e:  # noqa: BLE001 - the database's message and the likely cause, not a traceback
        hint = "; a running worker owns an embedded archive's directory: stop it first" if held else ""
        first = (str(e).strip().splitlines() or [""])[0]  # (not the server's stack trace that follows)
        _archive_unavailable(f"cannot open the archive {redacted(dsn)}: {type(e).__name__}: "
                             f"{first.replace(dsn, redacted(dsn))}{hint}")  # fmt: skip
    return client


def _archive_unavailable(reason: str) -> NoReturn:
    typer.echo(f"semsched: {reason}", err=True)
    raise typer.Exit(1)


def worker_port(settings: Settings) -> int:
    """The web port of the worker to ask: ``SEMSCHED_WEB_PORT`` (or a port given to ``settings``)
    when set, else the one the worker on ``settings.state_dir`` advertised
    (:mod:`streams.web_address`), else the default."""
    if "SEMSCHED_WEB_PORT" in os.environ or "web_port" in settings.model_fields_set:
        return settings.web_port
    return advertised_port(settings.state_dir) or settings.web_port


def query_via_worker(settings: Settings, sql: str, timeout: float = 1.0, *, max_rows: int | None = None) -> Rows:
    """Run ``sql`` through the running worker's ``/sql`` endpoint (:func:`worker_port`), within ``timeout``
    seconds there too and at most ``max_rows`` rows (0: no limit; None: the worker's,
    :data:`storage.queries.WORKER_SQL_LIMITS`).

    Raises :class:`WorkerUnavailable` when nothing answers, or a worker of another archive than
    ``settings.clickhouse_dsn`` does (so the caller can open the archive itself),
    :class:`WorkerBusy` when the worker took the query and gave no answer within ``timeout``
    seconds, and ``RuntimeError`` with the worker's message when the query fails.
    """
    port = worker_port(settings)
    limits = urllib.parse.urlencode({"timeout_s": f"{timeout:g}"} | ({} if max_rows is None else {"max_rows": max_rows}))
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/sql?{limits}",
        data=sql.encode(),
        method="POST",
        headers={"Content-Type": "text/plain; charset=utf-8", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.loads(resp.read().decode())
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise WorkerUnavailable("the worker has no /sql endpoint") from None
        detail = e.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            answer = json.loads(detail)
            _same_archive(settings, port, answer)
            detail = answer.get("error", detail)
        raise RuntimeError(f"query failed in the worker: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
        if isinstance(e, TimeoutError) or isinstance(getattr(e, "reason", None), TimeoutError):
            raise WorkerBusy(f"the worker on port {port} did not answer within {timeout:g} s (the query may "
                             "still be running there)") from None  # fmt: skip
        raise WorkerUnavailable(str(e)) from None
    except ValueError as e:
        raise WorkerUnavailable(f"not a semsched worker on port {port}: {e}") from None
    if not isinstance(body, dict) or "columns" not in body or "rows" not in body:
        raise WorkerUnavailable(f"unexpected answer from port {port}")
    _same_archive(settings, port, body)
    return list(body["columns"]), [tuple(r) for r in body["rows"]]


def _same_archive(settings: Settings, port: int, answer: Any) -> None:
    """A worker's answer names its archive; another archive's answer is no answer (a worker that
    predates the field is taken at its word)."""
    theirs = answer.get("archive") if isinstance(answer, dict) else None
    mine = redacted(settings.clickhouse_dsn)  # (a worker names its archive without the password)
    if theirs is not None and theirs not in (mine, settings.clickhouse_dsn):
        raise WorkerUnavailable(f"the worker on port {port} serves another archive than {mine}")


class WorkerSqlClient:
    """A read-only :class:`~storage.client.ArchiveClient` that sends every query to the
    worker's ``/sql`` endpoint (parameters bound client-side), so ``storage.queries``
    functions run unchanged while the worker owns the chdb directory."""

    kind = "worker"

    def __init__(self, settings: Settings, timeout: float = 10.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self.dsn = f"http://127.0.0.1:{worker_port(settings)}/sql"

    def query_rows(self, sql: str, parameters: Any = None) -> Rows:
        from storage.client import bind

        # (a whole read: train --from-archive, explain; the analyst's row limit is semsched sql's)
        return query_via_worker(self.settings, bind(sql, parameters), timeout=self.timeout, max_rows=0)

    def query_arrow(self, sql: str, parameters: Any = None) -> Any:
        import pyarrow as pa

        cols, rows = self.query_rows(sql, parameters)
        return pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)})

    def command(self, sql: str, parameters: Any = None) -> None:
        raise RuntimeError("the worker's /sql endpoint is read-only")

    def insert_arrow(self, table: str, data: Any) -> int:
        raise RuntimeError("the worker's /sql endpoint is read-only")

    def close(self) -> None:
        return None


def running_worker(settings: Settings, timeout: float = 10.0) -> WorkerSqlClient | None:
    """The running worker's read-only client when it answers for ``settings``' archive, ``None``
    when none does. Raises :class:`WorkerBusy` when one took the probe and gave no answer within
    ``timeout``: it owns the archive, so the caller must not take it for "no worker"."""
    client = WorkerSqlClient(settings, timeout=timeout)
    try:
        client.query_rows("SELECT 1")
    except WorkerUnavailable:
        return None
    return client


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _print(cols: list[str], rows: list[tuple[Any, ...]], fmt: OutputFormat) -> None:
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps({"columns": cols, "rows": [[json_cell(v) for v in r] for r in rows]}) + "\n")
    elif fmt is OutputFormat.csv:
        w = csv.writer(sys.stdout, lineterminator="\n")  # (the csv module's default is RFC 4180's CRLF)
        w.writerow(cols)
        for r in rows:
            w.writerow([text_cell(v) for v in r])
    else:
        t = Table(*cols, show_lines=False)
        for r in rows:
            t.add_row(*("NULL" if v is None else str(text_cell(v)) for v in r))
        console.print(t)
        console.print(f"[dim]{len(rows)} row(s)[/dim]")


@db_app.command("migrate")
def migrate_command() -> None:
    """Apply the archive's schema migrations to Settings().clickhouse_dsn; prints the
    versions applied (none when the schema is up to date). In embedded mode, stop the
    worker first: it owns the chdb directory (and migrates it itself on start)."""
    settings = Settings()
    dsn = settings.clickhouse_dsn
    try:
        applied = migrate(get_client(dsn))
    except Exception as e:  # noqa: BLE001 - the database's message and the likely cause, not a traceback
        hint = ("; a running worker owns the embedded archive's directory: stop it first (it migrates on start)"
                if held_by_another_process(dsn) else "")  # fmt: skip
        first = (str(e).strip().splitlines() or [""])[0].replace(dsn, redacted(dsn))  # (not ClickHouse's stack trace)
        err_console.print(f"[red]migrate failed:[/red] {type(e).__name__}: {first}{hint}")
        raise typer.Exit(1) from None
    if applied:
        console.print("applied migrations: " + ", ".join(f"{v:04d}" for v in applied))
    else:
        console.print("schema up to date (no migrations applied)")


def sql_command(
    query: str = typer.Argument(
        ..., help='A ClickHouse SQL query, e.g. "SELECT count() FROM jobs_submitted_accepted".'
    ),
    format: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table | csv | json"),  # noqa: A002
    timeout: float = typer.Option(60.0, help="Seconds to wait for a running worker's answer (and how long the "
                                  "query may run there).", min=0.1),
    max_rows: int = typer.Option(100_000, min=0, help="Rows a running worker may return (0: no limit; past it "
                                 "the query stops with the reason: the worker shares its process with it)."),
) -> None:
    """Run SQL against the archive. Tries the running worker first (POST
    http://127.0.0.1:<web_port>/sql: in embedded mode the worker owns the chdb directory), then,
    when no worker listens, opens Settings().clickhouse_dsn directly. Read the *_accepted views (what the
    worker acted on, one row per event), or tables with FINAL so a redelivered message counts once (an event
    sent twice is two rows of jobs_submitted, nodes_telemetry and jobs_lifecycle)."""
    settings = Settings()
    try:
        cols, rows = query_via_worker(settings, query, timeout=timeout, max_rows=max_rows)
    except WorkerUnavailable:
        client = open_archive(settings.clickhouse_dsn)
        try:
            cols, rows = run_sql(client, query)
        except Exception as e:  # noqa: BLE001 - show the database's message, not a traceback
            err_console.print(f"[red]query failed:[/red] {escape(str(e))}")
            raise typer.Exit(1) from None
    except RuntimeError as e:  # the worker's error, or WorkerBusy
        err_console.print(f"[red]{escape(str(e))}[/red]")
        raise typer.Exit(1) from None
    _print(cols, rows, format)


def explain_command(
    job_id: str = typer.Argument(..., help="The job id."),
    cluster: str | None = typer.Option(None, "--cluster", "-c",
                                       help="The cluster whose job it is (default: every cluster that holds the "
                                            "id, each on its own: an id is unique only within a cluster)."),
    timeout: float = typer.Option(60.0, help="Seconds to wait for a running worker's answer to each query.", min=0.1),
) -> None:  # fmt: skip
    """Why is JOB pending, or why did it land where it did: its submission, every decision
    (candidates, scores, reason) and lifecycle event in time order, and a one-paragraph
    answer. A job id that several clusters hold is answered for each cluster in turn (--cluster:
    that cluster's only). Reads through the running worker (http://127.0.0.1:<web_port>/sql) when
    one answers, else opens Settings().clickhouse_dsn directly."""
    settings = Settings()
    try:
        client: Any = running_worker(settings, timeout) or open_archive(settings.clickhouse_dsn)
        holders = job_clusters(client, job_id)
        clusters: list[str | None] = [cluster] if cluster is not None else list(holders)
        explained = [explain(client, job_id, c) for c in clusters or [None]]
    except typer.Exit:  # (a RuntimeError too: no archive, already said; found by review, it printed "1")
        raise
    except RuntimeError as err:  # WorkerBusy, or the worker's error
        err_console.print(f"[red]{escape(str(err))}[/red]")
        raise typer.Exit(1) from None
    if cluster is not None and cluster not in holders and holders:  # (found by review: "not in the archive")
        err_console.print(f"Job {escape(job_id)} is not in cluster {escape(cluster)!r}: the archive holds it in "
                      f"{', '.join(repr(c) for c in holders)} (--cluster)")  # fmt: skip
        raise typer.Exit(1)
    for e in explained:
        if len(explained) > 1:
            console.print(f"[bold]cluster {escape(str(e.cluster))}[/bold]")
        t = Table("time (UTC)", "what", "detail")
        for entry in e.timeline:
            t.add_row(entry.time.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3], entry.source, entry.text)
        if e.timeline:
            console.print(t)
        console.print(e.answer)
    if not any(e.timeline for e in explained):  # not in the archive (a typo, or another archive; with --cluster,
        raise typer.Exit(1)  # another cluster): like `kubectl describe` of no such pod
