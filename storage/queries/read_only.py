"""The analyst's SQL (``semsched sql``, the worker's ``POST /sql``) may read the archive, never change it.

:func:`check_read_only` accepts one statement that starts with ``SELECT``, ``WITH``, ``SHOW``,
``DESCRIBE``/``DESC``, ``EXPLAIN`` or ``EXISTS`` (after comments and opening parentheses), and
refuses a second statement after a ``;`` (chdb runs every statement of a multi-statement text)
and ``INTO OUTFILE`` (a write to the machine's files). Comments, string literals and quoted
identifiers are set aside first, so a ``;`` or a keyword inside them does not count. The
archive's own writes (the archiver's inserts, migrations, the model registry) do not come
through here.
"""

from __future__ import annotations

import re

READ_STATEMENTS = ("SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS")

_TOKENS = re.compile(r"""
    (?P<comment>--[^\n]*|\#[^\n]*|/\*.*?\*/)
  | (?P<quoted>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`(?:[^`\\]|\\.|``)*`)
  | (?P<open>'|"|`|/\*)
""", re.VERBOSE | re.DOTALL)  # fmt: skip


def _code(sql: str) -> str:
    """``sql`` with comments dropped and literals / quoted identifiers replaced by a placeholder."""
    out, pos = [], 0
    for m in _TOKENS.finditer(sql):
        out.append(sql[pos : m.start()])
        if m.lastgroup == "open":
            raise ValueError("unterminated string, quoted identifier or comment")
        out.append(" " if m.lastgroup == "comment" else " _ ")
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
    return sql.strip()
