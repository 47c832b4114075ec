"""``inference/`` keeps to its layer (the architecture's layout table): it imports only ``scheduling`` of
ours (and torch, numpy …), never ``storage``, ``streams`` or ``ops``, and it holds no SQL —
``storage/`` owns every query; ``ops`` reads the rows and passes them in.

Every module under ``inference/`` is parsed with ``ast``: imports at any depth (inside
functions too, and ``importlib.import_module`` / ``__import__`` with a literal name), and
every string literal (docstrings included) is searched for SQL statements
(``SELECT … FROM``, ``INSERT INTO``; upper case, as the project writes SQL), and calls of
the archive client's methods (``query_rows``, ``query_arrow``, ``insert_arrow``) are refused.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
FORBIDDEN = ("storage", "streams", "ops")
SQL = re.compile(r"\bSELECT\b[\s\S]*?\bFROM\b|\bINSERT\s+INTO\b")
CLIENT_CALLS = ("query_rows", "query_arrow", "insert_arrow")


def _forbidden(module: str) -> bool:
    return module.split(".")[0] in FORBIDDEN


def violations(source: str, name: str = "<source>") -> list[str]:
    """What in ``source`` breaks the layer: forbidden imports, archive-client calls, SQL in string literals."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        line = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            out += [f"{line} imports {a.name}" for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _forbidden(node.module):
            out.append(f"{line} imports from {node.module}")
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            target = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if func in ("import_module", "__import__") and isinstance(target, str) and _forbidden(target):
                out.append(f"{line} imports {target} dynamically")
            elif func in CLIENT_CALLS:
                out.append(f"{line} calls the archive client's {func}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            out.append(f"{line} holds SQL: {SQL.search(node.value).group(0)[:60]!r}")  # type: ignore[union-attr]
    return out


def test_the_checker_catches_each_kind_of_violation() -> None:
    source = '''
import storage.client
from ops.cli import models
import numpy, streams
def f():
    from storage.queries import summary
    import importlib
    importlib.import_module("ops.bench")
    client.insert_arrow("model_versions", batch)
    return "SELECT job_id\\n FROM decisions FINAL", "insert into t", "INSERT  INTO model_versions"
"""Select the node from the list (prose, not SQL); from storage's point of view."""
from scheduling.job import JobRequest
from .relative import storage
'''
    found = violations(source)
    assert len(found) == 8 and {v.split(" ", 1)[1] for v in found} == {
        "imports storage.client", "imports from ops.cli", "imports streams", "imports from storage.queries",
        "imports ops.bench dynamically", "calls the archive client's insert_arrow",
        "holds SQL: 'SELECT job_id\\n FROM'", "holds SQL: 'INSERT  INTO'",
    }  # fmt: skip


def test_inference_imports_no_storage_streams_or_ops_and_holds_no_sql() -> None:
    files = sorted((ROOT / "inference").rglob("*.py"))
    assert len(files) > 20  # the package is where this test thinks it is
    found = [v for f in files for v in violations(f.read_text(), str(f.relative_to(ROOT)))]
    assert found == [], "inference/ breaks its layer:\n" + "\n".join(found)
