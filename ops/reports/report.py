"""``Report``: collect text, tables, plots and data; write ``<name>.md``, ``<name>.json``
and ``<name>-<plot>.png`` into one directory.

Tables are printed as rich tables as they are added (people watch the console) and
rendered as markdown tables in the report. Numbers are formatted for reading; the JSON
file keeps full precision for machines.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ops.console import wide_console
from ops.reports import plots


def fmt(value: Any) -> str:
    """A cell for reading: thousands separators, 3 significant decimals, '–' for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        magnitude = abs(value)
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude >= 100:
            return f"{value:.1f}"
        if magnitude >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays
        return _jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    return value


class ReportError(Exception):
    """The report's directory or files cannot be written (the console tables were printed already)."""


class Report:
    def __init__(self, out_dir: Path, name: str, title: str, command: str, *,
                 console: Console | None = None, started: float | None = None) -> None:  # fmt: skip
        """``started``: ``time.perf_counter()`` when the work began (default: now) — the
        report states the elapsed time."""
        self.out_dir = Path(out_dir)
        self.name = name
        self.title = title
        self.command = command
        self.console = console or wide_console()
        self._md: list[str] = []
        self._data: dict[str, Any] = {}
        self._plots: list[Path] = []
        self._started = time.perf_counter() if started is None else started

    # -- content ---------------------------------------------------------------------------
    def text(self, markdown: str) -> None:
        self._md.append(markdown.strip() + "\n")

    def table(self, title: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
              note: str = "") -> None:  # fmt: skip
        cols = list(columns) if columns else list(dict.fromkeys(k for r in rows for k in r))
        rich_table = Table(title=title, title_justify="left")
        for c in cols:
            rich_table.add_column(c, justify="left" if _is_text_column(rows, c) else "right")
        lines = [f"### {title}\n", "| " + " | ".join(cols) + " |",
                 "|" + "|".join("---" if _is_text_column(rows, c) else "---:" for c in cols) + "|"]  # fmt: skip
        for r in rows:
            cells = [fmt(r.get(c)) for c in cols]
            rich_table.add_row(*cells)
            lines.append("| " + " | ".join(cells) + " |")
        self.console.print(rich_table)
        if note:
            self.console.print(f"[dim]{note}[/dim]")
            lines.append(f"\n{note}")
        self._md.append("\n".join(lines) + "\n")
        self._data.setdefault("tables", {})[title] = [{c: r.get(c) for c in cols} for r in rows]

    def data(self, key: str, value: Any) -> None:
        self._data[key] = value

    # -- plots -------------------------------------------------------------------------------
    def _make_dir(self) -> None:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ReportError(f"cannot write the report to {self.out_dir}: {e.strerror or e}") from None

    def _plot_path(self, name: str) -> Path:
        self._make_dir()
        return self.out_dir / f"{self.name}-{name}.png"

    def _add_plot(self, path: Path, title: str) -> None:
        self._plots.append(path)
        self._md.append(f"![{title}]({path.name})\n")

    def line_plot(self, name: str, title: str, xlabel: str, ylabel: str,
                  series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> Path:  # fmt: skip
        path = plots.line_plot(self._plot_path(name), title, xlabel, ylabel, series)
        self._add_plot(path, title)
        return path

    def cdf_plot(self, name: str, title: str, xlabel: str, samples: Mapping[str, Sequence[float]], *,
                 log_x: bool = False) -> Path:  # fmt: skip
        path = plots.cdf_plot(self._plot_path(name), title, xlabel, samples, log_x=log_x)
        self._add_plot(path, title)
        return path

    def bar_plot(self, name: str, title: str, ylabel: str, values: Mapping[str, float], *,
                 reference: Mapping[str, float] | None = None) -> Path:  # fmt: skip
        path = plots.bar_plot(self._plot_path(name), title, ylabel, values, reference=reference)
        self._add_plot(path, title)
        return path

    # -- output ------------------------------------------------------------------------------
    def write(self) -> list[Path]:
        """Write ``<name>.md`` and ``<name>.json`` (plots are already written); the paths."""
        self._make_dir()
        elapsed = time.perf_counter() - self._started
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        head = (f"# {self.title}\n\n`{self.command}`\n\n"
                f"{when} on {platform.node() or 'this machine'} ({platform.machine()}, "
                f"Python {platform.python_version()}); {elapsed:.1f} s.\n")  # fmt: skip
        md_path = self.out_dir / f"{self.name}.md"
        md_path.write_text(head + "\n" + "\n".join(self._md))
        json_path = self.out_dir / f"{self.name}.json"
        payload = {"title": self.title, "command": self.command, "generated_at": when,
                   "elapsed_s": round(elapsed, 3), **self._data,
                   "plots": [p.name for p in self._plots]}  # fmt: skip
        json_path.write_text(json.dumps(_jsonable(payload), indent=2) + "\n")
        self.console.print(f"[green]report:[/green] {md_path}  [dim]({json_path.name}, "
                           f"{len(self._plots)} plot(s))[/dim]")  # fmt: skip
        return [md_path, json_path, *self._plots]


def _is_text_column(rows: Sequence[Mapping[str, Any]], column: str) -> bool:
    values = [r.get(column) for r in rows if r.get(column) is not None]
    return bool(values) and all(isinstance(v, str) for v in values)
