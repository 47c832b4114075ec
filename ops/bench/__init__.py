"""Benchmarks behind ``semsched bench …``: they print numbers and write a JSON result.

- :mod:`ops.bench.pipeline` — the whole control plane on a local broker: sustained
  events/s through ingest → decision → command → archive, and submission → command
  latency.
- :mod:`ops.bench.step` — the in-process compute time of one scheduling step.
- :mod:`ops.bench.snapshot` — what a worker's step pays to know what placed jobs hold.
- :mod:`ops.bench.archiver` — the archiver's event-loop CPU on a steady stream.

Performance is measured here, never asserted in timed tests.
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np


def percentiles(values: list[float] | np.ndarray) -> dict[str, float | int | None]:
    """``n``, ``p50``, ``p99``, ``mean``, ``min``, ``max`` (None when there are no values): the
    percentiles as :class:`scheduling.metrics.Distribution` defines them, the simulator's and the SQL's."""
    from scheduling.metrics import Distribution

    a = np.asarray(values, dtype=float)
    d = Distribution.of(a)
    return {"n": d.n, "p50": d.p50, "p99": d.p99, "mean": d.mean, "min": float(a.min()) if a.size else None,
            "max": d.max}  # fmt: skip


def invoked_command(argv: list[str] | None = None) -> str:
    """The ``semsched bench …`` command line this process was started with, quoted so that it runs again as it
    was (found by review: ``--policies "las+best-fit, fgd"`` was recorded unquoted, and failed when re-run)."""
    import shlex
    import sys

    return "semsched bench " + shlex.join((sys.argv if argv is None else argv)[2:])


def fmt(v: float | int | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def environment() -> dict[str, Any]:
    """Where the numbers come from (they only compare on the same machine)."""
    import os

    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "platform": platform.platform(), "at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip


def write_json(path: Path, result: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def show_and_write(console: Any, table: Any, note: str, out: Path | None, bench: str, result: dict[str, Any]) -> None:
    """Print a benchmark's table and its dim ``note``; write ``result`` (with the bench's name and
    :func:`environment`) to ``out`` unless it is ``None``."""
    console.print(table)
    console.print(f"[dim]{note}[/]")
    if out is not None:
        console.print(f"wrote {write_json(out, {'bench': bench, **result, 'environment': environment()})}")
