"""ops/console.py: piped output is not cut at rich's assumed 80 columns."""

from __future__ import annotations

import io
import sys

import pytest
from rich.table import Table

from ops.console import PIPED_WIDTH, wide_console


def test_a_table_printed_to_a_pipe_keeps_its_long_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    piped = io.StringIO()  # not a terminal, whether pytest captures or not
    monkeypatch.setattr(sys, "stdout", piped)
    reason = "not evaluated (trained with --no-promote): semsched models promote models/candidates/jt4-s0 --models x"
    t = Table("version", "reason")
    t.add_row("imitation-fgd-20261126T143546Z-s0", reason)
    console = wide_console()
    assert console.width == PIPED_WIDTH
    console.print(t)
    assert reason in piped.getvalue()  # one line, whole (rich's 80 columns would wrap it)


def test_columns_still_sets_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert wide_console().width == 100
    assert wide_console(stderr=True).width == 100
