"""The analyst's SQL reads the archive and never changes it (storage/queries/read_only.py)."""

import pytest

from storage.client import ArchiveClient
from storage.queries import run_sql
from storage.queries.read_only import check_read_only


@pytest.mark.parametrize("sql", [
    "SELECT count() FROM jobs_submitted FINAL",
    "  select 1;  ",
    "WITH 1 AS x SELECT x",
    "(SELECT 1) UNION ALL (SELECT 2)",
    "-- how many\nSELECT 1",
    "/* a ; b */ SELECT 'a;b; DROP TABLE x', `weird;name` FROM (SELECT 1 AS `weird;name`)",
    "SHOW TABLES", "DESCRIBE TABLE decisions", "DESC decisions", "EXPLAIN SELECT 1", "EXISTS TABLE decisions",
    "SELECT 'it''s' -- into outfile",
    "SELECT $$a';b$$, $tag$ DROP TABLE x; $tag$", "SELECT 'file(' AS `url`, \"remote\" FROM (SELECT 1 AS remote)",
    "SELECT * FROM numbers(3)", "SELECT count() FROM merge(currentDatabase(), '^jobs_')",
])  # fmt: skip
def test_reads_pass(sql: str) -> None:
    assert check_read_only(sql) == sql.strip()


@pytest.mark.parametrize(("sql", "words"), [
    ("INSERT INTO deadletter (event_id) VALUES ('x')", "INSERT is refused"),
    ("DROP TABLE IF EXISTS nonexistent_t", "DROP is refused"),
    ("ALTER TABLE decisions DELETE WHERE 1", "ALTER is refused"),
    ("TRUNCATE TABLE decisions", "TRUNCATE is refused"),
    ("SELECT 1; DROP TABLE decisions", "one statement at a time"),
    ("select 1 ;insert into deadletter (event_id) values ('x')", "one statement at a time"),
    ("SELECT * FROM decisions INTO OUTFILE '/tmp/x.csv'", "INTO OUTFILE is refused"),
    ("SET readonly = 0", "SET is refused"),
    ("SELECT 'unterminated", "unterminated"),
    ("  ;  ", "no SQL statement"),
    # a '$$…$$' string hid a lone quote, so the guard read the ';' and the CREATE as inside a string
    ("SELECT $$'$$; CREATE TABLE probe (x UInt8) ENGINE = Memory; SELECT $$'$$", "one statement at a time"),
    ("SELECT $x$ never closed", "unterminated"),
    ("SELECT * FROM file('/etc/passwd', 'LineAsString')", r"file\(\) reaches outside"),
    ("SELECT * FROM `file` /* quoted */ ('/etc/passwd', 'LineAsString')", r"file\(\) reaches outside"),
    ("SELECT file('/etc/passwd')", r"file\(\) reaches outside"),
    ("SELECT * FROM url('http://example.com', 'CSV') JOIN s3('x') USING a", r"s3\(\), url\(\) reaches outside"),
    ("SELECT * FROM Python(batch)", r"Python\(\) reaches outside"),
    ("-- only a comment", "no SQL statement"),
    # ClickHouse nests block comments: to it the comment below ends at the second '*/', and the
    # quote this check took for the start of a literal, and the DROP, would run (found by review)
    ("SELECT 1 /* /* */ ' */; DROP TABLE decisions -- '", "block comment inside a block comment"),
    # to ClickHouse x$b$ is one name, not x and the start of a $b$ string (found by the review of that fix)
    ("SELECT 1 AS x$b$, 2 AS y; DROP TABLE decisions -- $b$", r"name with '\$' in it \(x\$b\$\)"),
    # ClickHouse decodes escapes in quoted names: these call file() and url() (found by review)
    (r"SELECT * FROM `\x66ile`('/etc/passwd', 'LineAsString')", "quoted name with a backslash"),
    ('SELECT * FROM "\\x75rl"(\'http://127.0.0.1:9/\', \'LineAsString\')', "quoted name with a backslash"),
])  # fmt: skip
def test_anything_else_is_refused_with_the_reason(sql: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_read_only(sql)


def test_run_sql_refuses_a_write_and_the_archive_is_unchanged(client: ArchiveClient) -> None:
    with pytest.raises(ValueError, match="INSERT is refused"):
        run_sql(client, "INSERT INTO deadletter (event_id) VALUES ('x')")
    with pytest.raises(ValueError, match="one statement at a time"):
        run_sql(client, "SELECT 1; INSERT INTO deadletter (event_id) VALUES ('x')")
    # ClickHouse runs an INSERT after WITH (found by review: it wrote through this door)
    with pytest.raises(ValueError, match="INSERT is refused, also after WITH"):
        run_sql(client, "WITH 7 AS x INSERT INTO deadletter (event_id) SELECT toString(x)")
    assert run_sql(client, "SELECT count() FROM deadletter")[1] == [(0,)]
    assert run_sql(client, "SELECT 1;")[1] == [(1,)]  # a trailing ';' is fine
    assert run_sql(client, "SELECT 'INSERT' AS word")[1] == [("INSERT",)]  # (a literal is no statement)


def test_run_sql_refuses_what_chdb_would_have_run(client: ArchiveClient) -> None:
    """Each of these runs on chdb as it stands (the first created a table through the guard)."""
    with pytest.raises(ValueError, match="one statement at a time"):
        run_sql(client, "SELECT $$'$$; CREATE TABLE probe (x UInt8) ENGINE = Memory; SELECT $$'$$")
    assert run_sql(client, "EXISTS TABLE probe")[1] == [(0,)]
    assert client.query_rows("SELECT $$'$$")[1] == [("'",)]  # chdb reads $$…$$ as a string
    with pytest.raises(ValueError, match="reaches outside"):
        run_sql(client, "SELECT * FROM `file`('/etc/hostname', 'LineAsString')")
    assert run_sql(client, "SELECT $$a;b$$ AS s")[1] == [("a;b",)]
    # a nested block comment: chdb ran the file() call after it (one comment to chdb, not to the check)
    assert client.query_rows("SELECT 1 /* /* */ ' */ AS one -- '")[1] == [(1,)]  # chdb nests them
    with pytest.raises(ValueError, match="block comment inside a block comment"):
        run_sql(client, "SELECT 1 /* /* */ ' */, (SELECT * FROM file('/etc/hostname', 'LineAsString')) -- '")
    assert client.query_rows(r"SELECT `\x66ile` FROM (SELECT 1 AS file)")[1] == [(1,)]  # chdb decodes the escape
    with pytest.raises(ValueError, match="quoted name with a backslash"):
        run_sql(client, r"SELECT * FROM `\x66ile`('/etc/hostname', 'LineAsString')")
    assert client.query_rows("SELECT 1 AS x$b$ -- $b$")[1] == [(1,)]  # chdb: x$b$ is a name
    with pytest.raises(ValueError, match="name with"):
        run_sql(client, "SELECT 1 AS x$b$, (SELECT * FROM file('/etc/hostname', 'LineAsString')) -- $b$")


def test_a_query_past_its_limits_stops_and_the_session_keeps_its_settings(client: ArchiveClient) -> None:
    """Found by review: a worker's ``/sql`` ran an analyst's query with no limit, in the session the archiver
    writes through (``SELECT count() FROM system.numbers`` never ended, and nothing was archived meanwhile;
    2 million rows held the event loop 14 s). Its limits are for that query only."""
    import time

    started = time.monotonic()
    with pytest.raises(Exception, match="TIMEOUT_EXCEEDED|Timeout exceeded"):
        run_sql(client, "SELECT count() FROM system.numbers", timeout_s=0.5)
    assert time.monotonic() - started < 30
    with pytest.raises(Exception, match="TOO_MANY_ROWS|Limit for result exceeded"):
        run_sql(client, "SELECT number FROM numbers(1000)", max_rows=100)
    assert run_sql(client, "SELECT count() FROM numbers(1000)", max_rows=100)[1] == [(1000,)]  # one row: fine
    settings = "SELECT value FROM system.settings WHERE name IN ('max_execution_time', 'max_result_rows') ORDER BY name"
    assert client.query_rows(settings)[1] == [("0",), ("0",)]  # the archiver's session: no limit left behind
    assert len(run_sql(client, "SELECT number FROM numbers(1000)")[1]) == 1000
