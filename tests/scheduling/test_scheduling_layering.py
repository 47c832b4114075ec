"""``scheduling/`` is the pure domain core (the architecture's layout table): the standard library,
numpy and pydantic, nothing else — no torch, no model server, no Kafka, no archive, and none of
our other packages (``inference`` plugs the learned scorer into its registry from outside).

Every module is parsed with ``ast``; imports at any depth count (inside functions too, and
``importlib.import_module`` / ``__import__`` with a literal name).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
ALLOWED = {"numpy", "pydantic", "scheduling"} | set(sys.stdlib_module_names)


def imported(source: str, name: str = "<source>") -> list[tuple[str, str]]:
    """(where, top-level module) of every absolute import in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            out += [(where, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((where, node.module.split(".")[0]))
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            target = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if func in ("import_module", "__import__") and isinstance(target, str):
                out.append((where, target.split(".")[0]))
    return out


def violations(source: str, name: str = "<source>") -> list[str]:
    return [f"{where} imports {module}" for where, module in imported(source, name) if module not in ALLOWED]


def test_the_checker_catches_each_kind_of_import() -> None:
    source = '''
import numpy as np
from scheduling.job import JobRequest
import torch
def f():
    from inference.policy import LearnedPolicy
    import importlib
    importlib.import_module("tritonclient.grpc")
    __import__("aiokafka")
'''
    found = violations(source)
    assert [v.split(" imports ")[1] for v in found] == ["torch", "inference", "tritonclient", "aiokafka"]


def test_scheduling_imports_only_the_standard_library_numpy_and_pydantic() -> None:
    files = sorted((ROOT / "scheduling").rglob("*.py"))
    assert len(files) > 50
    found = [v for path in files for v in violations(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []
