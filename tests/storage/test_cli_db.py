"""``semsched sql`` / ``explain`` through a worker's /sql endpoint, and the direct fallback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import typer
from storage_scenario import scenario
from typer.testing import CliRunner

from ops.cli.db import WorkerSqlClient, WorkerUnavailable, query_via_worker
from storage.client import ArchiveClient
from storage.json_cells import wire_cell
from storage.queries import explain, run_sql
from storage.writer import ArchiveWriter
from streams.settings import Settings

PATHS: list[str] = []  # what the stand-in worker was asked for (its limits)


@pytest.fixture
def worker(client: ArchiveClient) -> Iterator[int]:
    """A stand-in for the worker's /sql endpoint, answering from the chdb archive."""

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            sql = self.rfile.read(int(self.headers["Content-Length"])).decode()
            PATHS.append(self.path)
            try:
                cols, rows = run_sql(client, sql)
                body, code = json.dumps({"columns": cols, "rows": [[wire_cell(v) for v in r] for r in rows]}), 200  # as streams/web.py
            except Exception as e:  # noqa: BLE001
                body, code = json.dumps({"error": str(e)}), 400
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *a: Any) -> None:
            return None

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()


def test_query_via_worker(client: ArchiveClient, worker: int, tmp_path: Path) -> None:
    for table, events in scenario().items():
        ArchiveWriter(client).write(table, events)
    s = Settings(web_port=worker, state_dir=tmp_path)
    # generous timeouts: chdb's first error can take over the default 1 s on a loaded 2-core machine
    cols, rows = query_via_worker(s, "SELECT job_id FROM jobs_submitted FINAL ORDER BY job_id", timeout=30)
    assert cols == ["job_id"] and [r[0] for r in rows] == ["A", "B", "C", "D", "F"]
    with pytest.raises(RuntimeError, match="query failed in the worker"):
        query_via_worker(s, "SELECT nope", timeout=30)
    # explain over JSON gives the same answer as over chdb directly
    assert explain(WorkerSqlClient(s), "A").answer == explain(client, "A").answer
    assert explain(WorkerSqlClient(s), "F").answer == explain(client, "F").answer
    # the limits go with the query: the CLI's, and a whole read's (no row limit) for explain and training
    PATHS.clear()
    query_via_worker(s, "SELECT 1", timeout=30, max_rows=100)
    WorkerSqlClient(s, timeout=600).query_rows("SELECT 1")
    assert PATHS == ["/sql?timeout_s=30&max_rows=100", "/sql?timeout_s=600&max_rows=0"]


def test_no_worker_is_unavailable(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(WorkerUnavailable):
        query_via_worker(Settings(web_port=port, state_dir=tmp_path), "SELECT 1")


def test_cli_sql_via_worker(
    client: ArchiveClient, worker: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:

    from ops.cli.db import explain_command, sql_command

    for table, events in scenario().items():
        ArchiveWriter(client).write(table, events)
    monkeypatch.setenv("SEMSCHED_WEB_PORT", str(worker))
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path / "unused"))
    app = typer.Typer()
    app.command("sql")(sql_command)
    app.command("explain")(explain_command)
    r = CliRunner().invoke(app, ["sql", "--format", "json", "SELECT 1 AS x"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"columns": ["x"], "rows": [[1]]}
    # NaN and inf as the CLI prints them reading the archive itself (found by review: NULL through a worker)
    r = CliRunner().invoke(app, ["sql", "--format", "csv", "SELECT toFloat64(nan) AS a, toFloat64(inf) AS b"])
    assert r.exit_code == 0 and r.output.splitlines()[-1] == "nan,inf", r.output
    r = CliRunner().invoke(app, ["sql", "--format", "json", "SELECT toFloat64(nan) AS a"])
    assert r.exit_code == 0 and json.loads(r.output)["rows"] == [[None]], r.output
    r = CliRunner().invoke(app, ["explain", "nope"])
    assert r.exit_code == 1 and "not in the archive" in r.output  # a typo is not a success
    r = CliRunner().invoke(app, ["explain", "A"])
    assert r.exit_code == 0 and "Job A" in r.output
    r = CliRunner().invoke(app, ["explain", "A", "--cluster", "zzz"])  # (review: "not in the archive")
    assert r.exit_code == 1 and "not in cluster 'zzz': the archive holds it in 'default'" in " ".join(r.output.split())


def test_cli_explain_with_the_archive_unreachable_says_so_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:

    from ops.cli.db import explain_command

    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")  # no worker answers there
    monkeypatch.setenv("SEMSCHED_CLICKHOUSE_URL", "http://127.0.0.1:1/db")  # nor a ClickHouse server
    app = typer.Typer()
    app.command("explain")(explain_command)
    app.command("other")(lambda: None)  # (two commands: typer keeps the command name in the args)
    r = CliRunner().invoke(app, ["explain", "some-job"])
    assert r.exit_code == 1 and "cannot open the archive http://127.0.0.1:1/db" in r.output, r.output
    assert isinstance(r.exception, SystemExit)  # a clean exit, not an escaped error


def test_the_archives_password_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    from storage.client import redacted

    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")
    monkeypatch.setenv("SEMSCHED_CLICKHOUSE_URL", "http://analyst:s3cr3t@127.0.0.1:1/db")
    r = CliRunner().invoke(_db_app(), ["sql", "SELECT 1"])
    assert r.exit_code == 1 and "http://analyst:***@127.0.0.1:1/db" in r.output and "s3cr3t" not in r.output
    assert redacted("https://u:p%40ss@h:8443/db") == "https://u:***@h:8443/db" and redacted("chdb:///x") == "chdb:///x"


def test_an_embedded_archive_without_a_directory_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """chdb:// (an unset variable in chdb://$DIR) opened an in-memory archive: the worker's archiver
    committed what it wrote there, and the rows ended with the process."""
    from storage.client import get_client

    with pytest.raises(ValueError, match="names no directory"):
        get_client("chdb://")
    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")
    monkeypatch.setenv("SEMSCHED_CLICKHOUSE_URL", "chdb://")
    r = CliRunner().invoke(_db_app(), ["sql", "SELECT 1"])
    assert r.exit_code == 1 and "names no directory" in r.output, r.output


def _db_app() -> typer.Typer:
    from ops.cli.db import explain_command, sql_command

    app = typer.Typer()
    app.command("sql")(sql_command)
    app.command("explain")(explain_command)
    return app


@pytest.mark.parametrize("args", [["sql", "SELECT 1"], ["explain", "some-job"]])
def test_reading_an_archive_that_does_not_exist_says_so_and_creates_nothing(args: list[str], tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A mistyped SEMSCHED_STATE_DIR: not an empty archive created there and an empty answer."""
    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")  # no worker answers there
    monkeypatch.delenv("SEMSCHED_CLICKHOUSE_URL", raising=False)
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path / "typo"))
    r = CliRunner().invoke(_db_app(), args)
    assert r.exit_code == 1, r.output
    assert f"no archive at {tmp_path / 'typo' / 'chdb'}" in r.output and "SEMSCHED_STATE_DIR" in r.output
    assert "1" not in (line.strip() for line in r.output.splitlines())  # (explain printed the exit code too)
    assert not (tmp_path / "typo").exists()


def test_an_embedded_archive_path_that_is_a_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: ClickHouse's 18-line stack trace."""
    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")  # no worker answers there
    monkeypatch.delenv("SEMSCHED_CLICKHOUSE_URL", raising=False)
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path))
    (tmp_path / "chdb").write_text("")
    r = CliRunner().invoke(_db_app(), ["sql", "SELECT 1"])
    assert r.exit_code == 1 and f"{tmp_path / 'chdb'} is not a directory" in r.output, r.output


def test_an_archive_that_does_not_open_says_why_in_one_line_and_blames_no_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: the database's stack trace came with the message, and the CLI's own session, which
    held the directory's lock after the failure, was taken for a running worker's."""
    import ops.cli.db

    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")
    monkeypatch.delenv("SEMSCHED_CLICKHOUSE_URL", raising=False)
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path))
    (tmp_path / "chdb").mkdir()
    held = []

    def fails(dsn: str) -> None:
        held.append(dsn)  # from here on this process's own session would hold the lock
        raise RuntimeError("Code: 1001. DB::Exception: cannot load metadata\n0. stack frame\n1. stack frame")

    monkeypatch.setattr(ops.cli.db, "get_client", fails)
    monkeypatch.setattr(ops.cli.db, "held_by_another_process", lambda dsn: bool(held))
    r = CliRunner().invoke(_db_app(), ["sql", "SELECT 1"])
    assert r.exit_code == 1 and "cannot load metadata" in r.output, r.output
    assert "stack frame" not in r.output and "running worker" not in r.output, r.output


@pytest.fixture
def direct(client: ArchiveClient, monkeypatch: pytest.MonkeyPatch, chdb_dsn: str) -> None:
    """The CLI on the chdb archive itself: no worker answers."""
    monkeypatch.setenv("SEMSCHED_WEB_PORT", "1")
    monkeypatch.setenv("SEMSCHED_CLICKHOUSE_URL", chdb_dsn)


def test_sql_csv_ends_lines_with_newlines_as_unix_tools_expect(direct: None) -> None:
    r = CliRunner().invoke(_db_app(), ["sql", "-f", "csv", "SELECT number AS n, 'a,b' AS s FROM numbers(2)"])
    assert r.exit_code == 0, r.output
    assert r.stdout == 'n,s\n0,"a,b"\n1,"a,b"\n'


def test_a_failed_query_says_so_on_stderr_not_into_the_output(direct: None) -> None:
    """Found by review: `semsched sql ... -f csv > out.csv` wrote "query failed: ..." into out.csv."""
    r = CliRunner().invoke(_db_app(), ["sql", "-f", "csv", "SELECT no_such_column FROM jobs_submitted"])
    assert r.exit_code == 1 and r.stdout == ""
    assert "query failed" in r.stderr and "no_such_column" in r.stderr


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


#: values Python's json writes as NaN/Infinity or refuses, and types chdb cannot give as Arrow
AWKWARD = ("SELECT nan AS a, -inf AS b, (SELECT avg(number) FROM numbers(0)) AS empty_avg, NULL AS n, "
           "toUUID('61f0c404-5cb3-11e7-907b-a6006ad3dba0') AS u, toIPv4('10.0.0.1') AS ip, toDecimal64(1.25, 2) AS d, "
           "toDecimal128('0.1000000000000000000001', 22) AS d_exact, [1.5, nan] AS arr, map('k', 1) AS m")  # fmt: skip


def test_sql_json_is_json_for_every_type(direct: None) -> None:
    """NaN and ±inf as null (ClickHouse's JSON does the same), a UUID and a bare NULL (no Arrow
    type in chdb: a query error before), a Decimal (a TypeError traceback before)."""
    r = CliRunner().invoke(_db_app(), ["sql", "-f", "json", AWKWARD])
    assert r.exit_code == 0, r.output
    answer = json.loads(r.stdout, parse_constant=_not_json)
    assert answer["columns"] == ["a", "b", "empty_avg", "n", "u", "ip", "d", "d_exact", "arr", "m"]
    assert answer["rows"] == [[None, None, None, None, "61f0c404-5cb3-11e7-907b-a6006ad3dba0", "10.0.0.1", 1.25,
                               "0.1000000000000000000001", [1.5, None], {"k": 1}]]  # fmt: skip


def test_times_are_the_same_with_or_without_a_uuid_in_the_result(client: ArchiveClient) -> None:
    """A UUID column sends the result through ClickHouse's JSON (no Arrow type in chdb): its times
    came back as text there, as datetimes over Arrow, so `sql -f json` printed them two ways."""
    times = ("SELECT toDateTime64('2026-01-01 00:00:00.250', 3, 'UTC') AS t, toDate('2026-01-02') AS d, "
             "toDate32('2026-01-04') AS d32, toDateTime('2026-01-01 01:00:00', 'Europe/Paris') AS p, "
             "[toDateTime64('2026-01-05 00:00:00', 3, 'UTC')] AS arr")  # fmt: skip
    _, [arrow] = client.query_rows(times)
    _, [json_path] = client.query_rows(times + ", toUUID('61f0c404-5cb3-11e7-907b-a6006ad3dba0') AS u")
    assert json_path[:-1] == arrow and isinstance(arrow[0], datetime) and arrow[0].microsecond == 250_000


def test_sql_csv_and_table_keep_nan_apart_from_null(direct: None) -> None:
    r = CliRunner().invoke(_db_app(), ["sql", "-f", "csv", "SELECT nan AS a, -inf AS b, NULL AS n, [1, 2] AS arr"])
    assert r.exit_code == 0, r.output
    assert r.stdout == 'a,b,n,arr\nnan,-inf,,"[1, 2]"\n'
    r = CliRunner().invoke(_db_app(), ["sql", AWKWARD])
    assert r.exit_code == 0, r.output
    assert "│ nan " in r.stdout and "│ NULL " in r.stdout and "61f0c404-5cb3-11e7-907b-a6006ad3dba0" in r.stdout


def _answering(body: dict[str, Any]) -> tuple[ThreadingHTTPServer, int]:
    """A stand-in worker whose /sql gives ``body`` to every query."""

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *a: Any) -> None:
            return None

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def test_the_cli_finds_the_worker_of_its_state_dir_by_the_port_it_advertised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The demo's worker listens on a free port; SEMSCHED_STATE_DIR=<its state dir> leads there."""
    from streams.web_address import advertise

    monkeypatch.delenv("SEMSCHED_WEB_PORT", raising=False)
    monkeypatch.delenv("SEMSCHED_CLICKHOUSE_URL", raising=False)
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path))
    srv, port = _answering({"columns": ["x"], "rows": [[7]], "archive": f"chdb://{tmp_path.resolve() / 'chdb'}"})
    try:
        advertise(tmp_path, port)
        r = CliRunner().invoke(_db_app(), ["sql", "-f", "json", "SELECT 7 AS x"])
        assert r.exit_code == 0, r.output  # (no archive directory here: only the worker could answer)
        assert json.loads(r.stdout)["rows"] == [[7]]
    finally:
        srv.shutdown()


def test_a_worker_serving_another_archive_is_not_taken_at_its_answer(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A worker runs on one state dir; the CLI, pointed at another (here a typo), must not print
    that worker's rows as if they were its archive's."""
    monkeypatch.delenv("SEMSCHED_CLICKHOUSE_URL", raising=False)
    srv, port = _answering({"columns": ["n"], "rows": [[300]], "archive": "chdb:///somewhere/else/chdb"})
    try:
        monkeypatch.setenv("SEMSCHED_WEB_PORT", str(port))
        monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path / "typo"))
        with pytest.raises(WorkerUnavailable, match="another archive"):
            query_via_worker(Settings(), "SELECT count() FROM jobs_lifecycle")
        r = CliRunner().invoke(_db_app(), ["sql", "SELECT count() FROM jobs_lifecycle"])
        assert r.exit_code == 1 and "no archive at" in r.output and "300" not in r.output, r.output
    finally:
        srv.shutdown()


@pytest.mark.parametrize("command, args", [
    # a query slower than the old 1 s timeout was taken for "no worker": the CLI then opened the
    # directory the worker holds and failed on its lock, and the query went on in the worker
    ("sql", ["SELECT sleep(3)"]),
    # explain took a worker that did not answer its probe within 10 s for "no worker" the same way
    ("explain", ["job-1"]),
])  # fmt: skip
def test_the_cli_waits_for_a_busy_worker_and_never_opens_its_archive(command: str, args: list[str],
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:  # fmt: skip
    import socket

    from ops.cli.db import explain_command, sql_command

    with socket.socket() as busy:  # accepts the request and never answers
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        monkeypatch.setenv("SEMSCHED_WEB_PORT", str(busy.getsockname()[1]))
        monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path / "held-by-the-worker"))
        app = typer.Typer()
        app.command(command)({"sql": sql_command, "explain": explain_command}[command])
        app.command("unused")(lambda: None)
        r = CliRunner().invoke(app, [command, "--timeout", "0.5", *args])
    assert r.exit_code == 1
    text = " ".join(r.output.split())
    assert "did not answer within 0.5 s" in text and "no archive at" not in text, text


def test_the_worker_client_is_an_archive_client(tmp_path: Path) -> None:
    """Every method of the ArchiveClient protocol, so storage functions and callers that close their
    client take it (a function added to the module once swallowed its close())."""
    from storage.client import ArchiveClient as Protocol

    wanted = {n for n in vars(Protocol) if not n.startswith("_")} | set(Protocol.__annotations__)
    client = WorkerSqlClient(Settings(state_dir=tmp_path))
    assert all(hasattr(client, n) for n in wanted), sorted(n for n in wanted if not hasattr(client, n))
    client.close()


def test_an_up_to_date_archive_is_read_by_an_account_that_may_not_write(client: ArchiveClient, chdb_dsn: str) -> None:
    """Reading (``semsched sql`` / ``explain``) migrated the archive first, and the migration's bootstrap is
    a CREATE: an account that may only read could not open an up-to-date archive (found by review)."""
    from ops.cli.db import open_archive
    from storage.migrate import behind

    assert not behind(client)
    client.command("SET readonly = 1")  # reads only, for good, in the session the CLI's client shares here
    assert run_sql(open_archive(chdb_dsn), "SELECT count() FROM decisions")[1] == [(0,)]


@pytest.mark.parametrize("missing", [(), (15,)])
def test_a_read_through_an_older_worker_says_to_restart_it(missing: tuple[int, ...], monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:  # fmt: skip
    """A worker started before an upgrade serves an archive without the new migrations (it migrates only
    at start): a read of a new column through it failed with ClickHouse's unknown-column error."""
    import ops.cli.db
    from ops.cli.models import archive_client
    from storage.migrate import load_migrations

    class Worker:
        def query_rows(self, sql: str, parameters: object = None) -> tuple[list[str], list[tuple[int, int]]]:
            return ["version", "statement"], [(m.version, i) for m in load_migrations() if m.version not in missing
                                              for i in range(len(m.statements))]  # fmt: skip

    class Busy(Worker):
        def query_rows(self, sql: str, parameters: object = None) -> tuple[list[str], list[tuple[int, int]]]:
            raise ops.cli.db.WorkerBusy("the worker did not answer within 0.5 s")

    worker = Worker()
    monkeypatch.setattr(ops.cli.db, "running_worker", lambda settings: worker)
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path))
    if not missing:
        assert archive_client(None, write=False) is worker
    else:
        with pytest.raises(typer.BadParameter, match="has not applied this version's migrations 0015: it runs an older"):
            archive_client(None, write=False)
    busy = Busy()  # no answer to the check: not taken for an old worker (the read itself says it is busy)
    monkeypatch.setattr(ops.cli.db, "running_worker", lambda settings: busy)
    assert archive_client(None, write=False) is busy
