"""Loader for the Topcuoglu et al. (2002) example graph as CSVs (the layout of
mackncheesiest/heft's ``test/`` directory), three files sharing a prefix:

- ``<prefix>_task_exe_time.csv``: header ``TP,P_0,…,P_{m-1}``; one row per task
  ``T_i,w_i0,…``: the execution time of task ``i`` on processor ``j``;
- ``<prefix>_task_connectivity.csv``: header ``T,T0,…,T{n-1}``; row ``i``, column ``j``
  is the data volume on edge ``i → j`` (0 = no edge);
- ``<prefix>_resource_BW.csv``: header ``P,P_0,…``; the bandwidth between processors
  (the diagonal, 0 in the file, is ignored: same-processor transfers are free).

Communication cost = data / bandwidth; no latency. Task and processor names come from the
row labels and the header of the execution-time file, as written.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ops.workflows.errors import WorkflowFormatError
from ops.workflows.paths import topcuoglu_dir
from scheduling.dag import DagProblem, GraphError, Platform, PlatformError, TaskGraph


def _matrix(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """(column labels, row labels, values) of a labelled numeric CSV matrix."""
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)  # (each row with its line number in the file: blank lines are skipped)
            rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    except OSError as e:
        raise WorkflowFormatError(path, f"cannot read: {e.strerror or e}") from None
    except (UnicodeDecodeError, csv.Error) as e:  # (found by review: a traceback, not the file's name)
        raise WorkflowFormatError(path, f"not a UTF-8 CSV file: {e}") from None
    if len(rows) < 2:
        raise WorkflowFormatError(path, "expected a header line and at least one row")
    header = [c.strip() for c in rows[0][1][1:]]
    labels, values = [], []
    seen: dict[str, int] = {}  # label -> its line
    for lineno, row in rows[1:]:
        if len(row) != len(header) + 1:
            raise WorkflowFormatError(path, f"line {lineno} has {len(row)} fields, the header {len(header) + 1}")
        label = row[0].strip()
        if label in seen:  # (found by review: a repeated task name was blamed on the connectivity file)
            raise WorkflowFormatError(path, f"line {lineno}: the row label {label!r} is on line {seen[label]} too")
        seen[label] = lineno
        labels.append(label)
        try:
            values.append([float(c) for c in row[1:]])
        except ValueError:
            raise WorkflowFormatError(path, f"line {lineno}: a value is not a number: {row[1:]}") from None
        if not all(math.isfinite(v) and v >= 0 for v in values[-1]):  # (found by review: no line was named)
            raise WorkflowFormatError(path, f"line {lineno}: values must be finite and >= 0: {row[1:]}")
    return header, labels, np.asarray(values, dtype=np.float64)


def load_topcuoglu(directory: Path | None = None, prefix: str = "canonicalgraph") -> DagProblem:
    d = directory or topcuoglu_dir()
    exe_path = d / f"{prefix}_task_exe_time.csv"
    conn_path = d / f"{prefix}_task_connectivity.csv"
    bw_path = d / f"{prefix}_resource_BW.csv"
    procs, tasks, costs = _matrix(exe_path)
    conn_cols, conn_rows, conn = _matrix(conn_path)
    bw_cols, bw_rows, bw = _matrix(bw_path)
    n, p = costs.shape
    if conn.shape != (n, n):
        raise WorkflowFormatError(conn_path, f"connectivity is {conn.shape[0]}×{conn.shape[1]}, but "
                                  f"{exe_path.name} has {n} tasks")  # fmt: skip
    if bw.shape != (p, p):
        raise WorkflowFormatError(bw_path, f"bandwidth is {bw.shape[0]}×{bw.shape[1]}, but "
                                  f"{exe_path.name} has {p} processors")  # fmt: skip
    src, dst = np.nonzero(conn)
    try:
        graph = TaskGraph(tuple(tasks), src, dst, conn[src, dst])
    except GraphError as e:
        raise WorkflowFormatError(conn_path, str(e)) from None
    off = ~np.eye(p, dtype=bool)
    if np.any(bw[off] <= 0):
        raise WorkflowFormatError(bw_path, "bandwidth between different processors must be > 0")
    try:
        platform = Platform(tuple(procs), bw, np.zeros((p, p)))
        return DagProblem(graph, platform, costs, name=f"topcuoglu-2002 ({prefix})")
    except (GraphError, PlatformError) as e:
        raise WorkflowFormatError(exe_path, str(e)) from None
