"""One ClickHouse client per DSN per process: embedded chdb or a ClickHouse server.

``get_client("chdb:///abs/path")`` opens the embedded engine on that data directory;
``get_client("http(s)://user:pass@host:8123/db")`` talks to a server with clickhouse-connect.
Both return an :class:`ArchiveClient` with the same small surface the rest of ``storage``
uses: :meth:`~ArchiveClient.command`, :meth:`~ArchiveClient.query_arrow`,
:meth:`~ArchiveClient.query_rows` and :meth:`~ArchiveClient.insert_arrow`.

Why not clickhouse-connect's own chdb backend: it first shipped in clickhouse-connect 1.6
(and in chdb 4.2 as ``chdb.cc_backend``); the pinned clickhouse-connect 0.10 / chdb 3.7
have none (``get_client(dsn="chdb://…")`` there builds an HTTP client for host ``None``).
So the embedded client here is a thin adapter over ``chdb.connect``:

- chdb 3.7 allows ONE open connection per process. Opening a second data directory
  while one is open raises ``RuntimeError('Another connection is already active with
  different path …')``; closing the first and then opening another works. Hence the
  cache below refuses a second chdb path while one is open (call :func:`close_client`).
- Inserts are column-wise: ``INSERT INTO t (cols) SELECT cols FROM Python(batch)`` reads
  a ``pyarrow.Table`` in place (chdb's ``Python()`` table function), never row tuples.
- Calls are serialised with a lock: one query at a time on the embedded engine.

Parameters are bound client-side (``%(name)s`` placeholders, clickhouse-connect's
``finalize_query``) on both backends, so the same SQL text also runs over the worker's
``/sql`` endpoint.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

import pyarrow as pa
from clickhouse_connect.driver.binding import finalize_query

from storage.json_rows import JSON_SETTINGS, rows_from_json_compact

#: every insert: a batch may span more months than ClickHouse's default of 100 partitions per insert
#: (the event tables are partitioned by month; a replay of an old trace beside live events does so),
#: and an insert refused for that would be retried for ever by the archiver
INSERT_SETTINGS = {"max_partitions_per_insert_block": 0}
INSERT_SETTINGS_SQL = ", ".join(f"{k} = {v}" for k, v in INSERT_SETTINGS.items())

__all__ = [
    "ArchiveClient",
    "ChdbClient",
    "HttpArchiveClient",
    "bind",
    "close_all",
    "close_client",
    "get_client",
    "rows_from_arrow",
]

Params = Mapping[str, Any] | Sequence[Any] | None


def bind(sql: str, parameters: Params = None) -> str:
    """Substitute ``%(name)s`` / ``%s`` placeholders with quoted ClickHouse literals."""
    if not parameters:
        return sql.strip().rstrip(";")
    return finalize_query(sql.strip(), parameters)  # type: ignore[arg-type]


def _py(value: Any) -> Any:
    """Make one Arrow-derived Python value friendly: bytes → str, map pairs → dict."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_py(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_py(v) for v in value)
    if isinstance(value, dict):
        return {k: _py(v) for k, v in value.items()}
    return value


#: ClickHouse's error (chdb's and a server's) for a result column Arrow cannot carry
_NOT_IN_ARROW = "is not supported for conversion into Arrow data format"


def rows_from_arrow(table: pa.Table) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and row tuples of an Arrow result (binary strings decoded as UTF-8 with
    replacement, maps as dicts)."""
    cols: list[list[Any]] = []
    for field, column in zip(table.schema, table.columns, strict=True):
        values = column.to_pylist()
        if pa.types.is_map(field.type):
            values = [None if v is None else {_py(k): _py(x) for k, x in v} for v in values]
        else:
            values = [_py(v) for v in values]
        cols.append(values)
    return list(table.column_names), list(zip(*cols, strict=True)) if cols else []


@runtime_checkable
class ArchiveClient(Protocol):
    """What ``storage`` needs from ClickHouse; both backends implement it."""

    dsn: str
    kind: str  # "chdb" | "http"

    def command(self, sql: str, parameters: Params = None) -> None:
        """Run a statement that returns nothing useful (DDL, INSERT … SELECT)."""

    def query_arrow(self, sql: str, parameters: Params = None) -> pa.Table:
        """Run a SELECT; the result as a ``pyarrow.Table`` (strings as ``binary``)."""
        ...

    def query_rows(self, sql: str, parameters: Params = None,
                   settings: dict[str, Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:  # fmt: skip
        """Run a SELECT; column names and row tuples. ``settings``: ClickHouse settings for this query
        only (an analyst's limits, :func:`storage.queries.run_sql`)."""
        ...

    def insert_arrow(self, table: str, data: pa.Table) -> int:
        """Insert a column-wise batch; returns the number of rows sent."""
        ...

    def close(self) -> None:
        """Release the connection."""


class ChdbClient:
    """The embedded ClickHouse engine (chdb) on one data directory, in this process."""

    kind = "chdb"

    def __init__(self, dsn: str, path: str) -> None:
        import chdb

        self.dsn = dsn
        self.path = path
        self._lock = threading.RLock()
        self._conn = chdb.connect(path)
        self._closed = False
        # results as Arrow ``binary`` for String columns: ClickHouse strings are bytes
        # (the dead-letter archive keeps the original, possibly non-UTF-8, message).
        self._conn.query("SET output_format_arrow_string_as_string = 0")
        for name, value in JSON_SETTINGS.items():  # for query_rows' fallback
            self._conn.query(f"SET {name} = {value}")
        # the zone a time without one is written in by that fallback (found by review: read as UTC, a host
        # off UTC got its times hours off)
        self._zone = str(self._conn.query("SELECT timezone()", "CSV").bytes().decode().strip().strip('"')) or "UTC"

    def _run(self, sql: str, fmt: str = "CSV") -> Any:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"chdb client for {self.path} is closed")
            return self._conn.query(sql, fmt)

    def command(self, sql: str, parameters: Params = None) -> None:
        self._run(bind(sql, parameters))

    def query_arrow(self, sql: str, parameters: Params = None) -> pa.Table:
        return self._run(bind(sql, parameters), "Arrowtable")

    def query_rows(self, sql: str, parameters: Params = None,
                   settings: dict[str, Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:  # fmt: skip
        if settings:
            with self._lock:  # (the session is the archiver's too: set for this query only, under its lock)
                return self._with_settings(settings, lambda: self.query_rows(sql, parameters))
        try:
            return rows_from_arrow(self.query_arrow(sql, parameters))
        except Exception as e:
            if _NOT_IN_ARROW not in str(e):
                raise
        # a type Arrow has no place for (UUID, a bare NULL's Nothing): ClickHouse's own JSON writes every type
        return rows_from_json_compact(self._run(bind(sql, parameters), "JSONCompact").bytes(), self._zone)

    def _with_settings(self, settings: dict[str, Any], run: Callable[[], Any]) -> Any:
        """``run()`` with ``settings`` set in the session, then set back as they were (the caller holds the
        lock, which is re-entrant)."""
        names = ", ".join(f"'{name}'" for name in settings)
        before = self._conn.query(f"SELECT name, value FROM system.settings WHERE name IN ({names})", "JSONCompact")
        old = {name: value for name, value in json.loads(before.bytes())["data"]}
        for name, value in settings.items():
            self._conn.query(bind(f"SET {name} = %(v)s", {"v": value}))  # (the driver's literals)
        try:
            return run()
        finally:
            for name in settings:
                self._conn.query(bind(f"SET {name} = %(v)s", {"v": old[name]}))

    def insert_arrow(self, table: str, data: pa.Table) -> int:
        if data.num_rows == 0:
            return 0
        cols = ", ".join(f"`{c}`" for c in data.column_names)
        # chdb's Python() table function resolves the name in the calling frames.
        _semsched_batch = data  # noqa: F841
        with self._lock:
            if self._closed:
                raise RuntimeError(f"chdb client for {self.path} is closed")
            self._conn.query(f"INSERT INTO {table} ({cols}) SETTINGS {INSERT_SETTINGS_SQL} "
                             f"SELECT {cols} FROM Python(_semsched_batch)")  # fmt: skip
        return data.num_rows

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()


class HttpArchiveClient:
    """A ClickHouse server over HTTP(S), through clickhouse-connect."""

    kind = "http"

    def __init__(self, dsn: str) -> None:
        import clickhouse_connect

        u = urlparse(dsn)
        self.dsn = dsn
        self._client = clickhouse_connect.get_client(
            interface=u.scheme,
            host=u.hostname or "localhost",
            port=u.port or (8443 if u.scheme == "https" else 8123),
            username=unquote(u.username) if u.username else "default",
            password=unquote(u.password) if u.password else "",
            database=(u.path.strip("/") or "default"),
            autogenerate_session_id=False,
        )

    def command(self, sql: str, parameters: Params = None) -> None:
        self._client.command(bind(sql, parameters))

    def query_arrow(self, sql: str, parameters: Params = None) -> pa.Table:
        return self._client.query_arrow(bind(sql, parameters), use_strings=False)

    def query_rows(self, sql: str, parameters: Params = None,
                   settings: dict[str, Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:  # fmt: skip
        try:
            return rows_from_arrow(self._client.query_arrow(bind(sql, parameters), use_strings=False,
                                                            settings=settings or None))  # fmt: skip
        except Exception as e:
            if _NOT_IN_ARROW not in str(e):
                raise
        # a type Arrow has no place for (UUID, a bare NULL's Nothing): the driver's native format has one
        result = self._client.query(bind(sql, parameters), settings=settings or None)
        return list(result.column_names), [tuple(_py(v) for v in row) for row in result.result_rows]

    def insert_arrow(self, table: str, data: pa.Table) -> int:
        if data.num_rows == 0:
            return 0
        self._client.insert_arrow(table, data, settings=INSERT_SETTINGS)
        return data.num_rows

    def close(self) -> None:
        self._client.close()


_CLIENTS: dict[str, ArchiveClient] = {}
_CACHE_LOCK = threading.Lock()


def chdb_path(dsn: str) -> str:
    """The data directory of a ``chdb://`` DSN (``chdb:///abs``, ``chdb://rel`` or ``chdb://:memory:``).
    An empty one is refused: it opened an in-memory archive (``chdb://$UNSET_VARIABLE``), whose rows
    the archiver committed as written and the process took with it when it ended."""
    rest = dsn[len("chdb://") :]
    if not rest:
        raise ValueError("the DSN chdb:// names no directory: use chdb:///ABSOLUTE/DIR or chdb://RELATIVE/DIR "
                         "(chdb://:memory: for an archive that ends with the process)")  # fmt: skip
    return rest


def redacted(dsn: str) -> str:
    """``dsn`` with its password, if any, as ``***``: what messages and answers may show."""
    u = urlparse(dsn)
    if not u.password:
        return dsn
    return u._replace(netloc=u.netloc.replace(f":{u.password}@", ":***@", 1)).geturl()


def get_client(dsn: str) -> ArchiveClient:
    """The process-wide client for ``dsn`` (created on first use, then cached).

    Raises ``RuntimeError`` when asked for a second chdb data directory while another is
    open in this process (chdb allows one); close the first with :func:`close_client`.
    """
    with _CACHE_LOCK:
        client = _CLIENTS.get(dsn)
        if client is not None:
            return client
        if dsn.startswith("chdb://"):
            open_chdb = [c for c in _CLIENTS.values() if c.kind == "chdb"]
            if open_chdb:
                raise RuntimeError(
                    f"chdb allows one data directory per process; {open_chdb[0].dsn} is open, "
                    f"close it (storage.client.close_client) before opening {redacted(dsn)}"
                )
            client = ChdbClient(dsn, chdb_path(dsn))
        elif dsn.startswith(("http://", "https://")):
            client = HttpArchiveClient(dsn)
        else:
            raise ValueError(f"unsupported ClickHouse DSN {redacted(dsn)!r}: use chdb://PATH or http(s)://…")
        _CLIENTS[dsn] = client
        return client


def held_by_another_process(dsn: str) -> bool:
    """Does another process hold this embedded archive's directory? ClickHouse keeps its ``status`` file
    flock-ed while it runs there. False for a server DSN and for a directory nothing holds."""
    import fcntl

    if not dsn.startswith("chdb://"):
        return False
    try:
        with open(Path(chdb_path(dsn)) / "status", "rb") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except (OSError, ValueError):
        return False
    return False


def open_here(dsn: str) -> bool:
    """Whether this process has a client of ``dsn`` open (an embedded archive's lock is then its own)."""
    return dsn in _CLIENTS


def close_client(dsn: str) -> None:
    """Close and forget the cached client of ``dsn`` (no-op if none)."""
    with _CACHE_LOCK:
        client = _CLIENTS.pop(dsn, None)
    if client is not None:
        client.close()


def close_all() -> None:
    """Close every cached client."""
    for dsn in list(_CLIENTS):
        close_client(dsn)
