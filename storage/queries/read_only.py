"""The analyst's SQL (``semsched sql``, the worker's ``POST /sql``) may read the archive, never change it.

:func:`check_read_only` accepts one statement that starts with ``SELECT``, ``WITH``, ``SHOW``,
``DESCRIBE``/``DESC``, ``EXPLAIN`` or ``EXISTS`` (after comments and opening parentheses), and
refuses a second statement after a ``;`` (chdb runs every statement of a multi-statement text),
``INTO OUTFILE`` (a write to the machine's files) and the functions that reach outside the
archive (:data:`OUTSIDE_FUNCTIONS`: files, URLs, other databases, processes, the worker's own
Python objects). Comments, string literals (``'…'`` and ``$tag$…$tag$``) and quoted
identifiers are set aside first, so a ``;``, a keyword or a function name inside them does not
count. ``INSERT`` is refused anywhere outside them: ClickHouse runs ``WITH … INSERT INTO t SELECT …``
(found by review: a write through the read-only door). Three things ClickHouse reads otherwise than this
check would are refused: a name (or number)
with ``$`` in it (``x$b$`` is one name to ClickHouse, where this check would read a ``$b$…$b$``
string after ``x``), and a block comment with ``/*`` inside it (ClickHouse nests them: ``/* /* */ …
*/`` is one comment, which would end at the first ``*/`` here), and a quoted name with a backslash in
it (ClickHouse decodes its escapes: a quoted ``\\x66ile`` is ``file``; found by review). Either way, what this check took for
a comment or a literal would run. The archive's own writes (the archiver's inserts, migrations, the
model registry) do not come through here.
"""

from __future__ import annotations

import re

READ_STATEMENTS = ("SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS")

# Table functions (and the scalar ``file``) that read or write outside the archive: the
# machine's files, the network, other databases, processes, and chdb's ``python`` (objects in
# the calling process's frames). ``numbers``, ``values``, ``merge``, ``view`` and the like stay.
OUTSIDE_FUNCTIONS = frozenset({
    "azureblobstorage", "azureblobstoragecluster", "cluster", "clusterallreplicas", "cosn", "deltalake",
    "deltalakeazure", "deltalakecluster", "deltalakelocal", "deltalakes3", "dictionary", "executable",
    "file", "filecluster", "gcs", "hdfs", "hdfscluster", "hudi", "hudicluster", "iceberg", "icebergazure",
    "icebergazurecluster", "iceberghdfs", "iceberghdfscluster", "iceberglocal", "icebergs3",
    "icebergs3cluster", "input", "jdbc", "mysql", "odbc", "oss", "postgresql", "prometheusquery",
    "prometheusqueryrange", "python", "redis", "remote", "remotesecure", "s3", "s3cluster", "sqlite",
    "url", "urlcluster", "ytsaurus", "mongodb", "arrowflight", "paimon", "hive", "kafka", "nats", "rabbitmq",
})  # fmt: skip

_TOKENS = re.compile(r"""
    (?P<comment>--[^\n]*|\#[^\n]*|/\*.*?\*/)
  | (?P<word>\w[\w$]*)
  | (?P<quoted>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`(?:[^`\\]|\\.|``)*`|\$(?P<tag>\w*)\$.*?\$(?P=tag)\$)
  | (?P<open>'|"|`|/\*|\$\w*\$)
""", re.VERBOSE | re.DOTALL)  # fmt: skip
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def _code(sql: str) -> str:
    """``sql`` with comments dropped and literals replaced by a placeholder; a quoted identifier
    of word characters stays as the bare word (`` `file`(…) `` calls ``file``), any other by the
    placeholder."""
    out, pos = [], 0
    for m in _TOKENS.finditer(sql):
        out.append(sql[pos : m.start()])
        if m.group("open") is not None:
            raise ValueError("unterminated string, quoted identifier or comment")
        token = m.group(0)
        if m.lastgroup == "word":
            if "$" in token:
                raise ValueError(f"a name with '$' in it ({token}) is refused: ClickHouse reads one as a name, not "
                                 "as the start of a $tag$ string")  # fmt: skip
            out.append(token)
            pos = m.end()
            continue
        if m.lastgroup == "comment":
            if token.startswith("/*") and "/*" in token[2:]:
                raise ValueError("a block comment inside a block comment is refused (ClickHouse nests them)")
            out.append(" ")
        elif token[0] in '`"' and "\\" in token:  # ClickHouse decodes escapes in names: `\x66ile` is file
            raise ValueError(f"a quoted name with a backslash in it ({token}) is refused: ClickHouse reads "
                             "escapes in names")  # fmt: skip
        elif token[0] in '`"' and re.fullmatch(r"\w+", token[1:-1]):
            out.append(f" {token[1:-1]} ")
        else:
            out.append(" _ ")
        pos = m.end()
    out.append(sql[pos:])
    return "".join(out)


def check_read_only(sql: str) -> str:
    """``sql`` (stripped) if it only reads; else ``ValueError`` with the reason."""
    code = _code(sql).strip()
    body = code.rstrip(";").strip()
    if not body:
        raise ValueError("no SQL statement")
    if ";" in body:
        raise ValueError("one statement at a time: the archive takes no second statement after ';'")
    first = re.match(r"[\s(]*([A-Za-z]+)", body)
    keyword = first.group(1).upper() if first else ""
    if keyword not in READ_STATEMENTS:
        raise ValueError(f"the archive is read-only here: {keyword or 'this statement'} is refused "
                         f"(allowed: {', '.join(READ_STATEMENTS)})")  # fmt: skip
    if re.search(r"\bINTO\s+OUTFILE\b", body, re.IGNORECASE):
        raise ValueError("the archive is read-only here: INTO OUTFILE is refused")
    if re.search(r"\bINSERT\b", body, re.IGNORECASE):  # WITH x AS (...) INSERT INTO t SELECT ... writes
        raise ValueError("the archive is read-only here: INSERT is refused, also after WITH")
    outside = sorted({m.group(1) for m in _CALL.finditer(body) if m.group(1).lower() in OUTSIDE_FUNCTIONS})
    if outside:
        raise ValueError(f"the archive is all this SQL may read: {', '.join(f'{name}()' for name in outside)} "
                         "reaches outside it (files, URLs, other databases, processes or Python objects) "
                         "and is refused")  # fmt: skip
    return sql.strip()
