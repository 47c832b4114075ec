"""The Topcuoglu CSV loader: the paper's graph and numbers, and errors naming the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ops.workflows import WorkflowFormatError, load_topcuoglu
from scheduling.dag import assert_valid_schedule
from scheduling.dag.schedulers import get_dag_scheduler

PREFIX = "canonicalgraph"


def test_loads_the_paper_graph_and_heft_80_cpop_86(topcuoglu_csvs: Path) -> None:
    p = load_topcuoglu(topcuoglu_csvs)
    assert (p.n_tasks, p.graph.n_edges, p.n_procs) == (10, 15, 3)
    assert p.graph.names[0] == "T_0" and p.platform.names == ("P_0", "P_1", "P_2")
    assert p.costs[9].tolist() == [21, 7, 16] and p.graph.data.sum() == 241
    assert p.graph.entries.tolist() == [0] and p.graph.exits.tolist() == [9]
    heft = get_dag_scheduler("heft").schedule(p)
    cpop = get_dag_scheduler("cpop").schedule(p)
    assert (heft.makespan, cpop.makespan) == (80.0, 86.0)
    for s in (heft, cpop, get_dag_scheduler("fifo").schedule(p)):
        assert_valid_schedule(p, s)


def copy(src: Path, dst: Path) -> Path:
    for f in src.glob(f"{PREFIX}_*.csv"):
        shutil.copy(f, dst / f.name)
        (dst / f.name).chmod(0o644)
    return dst


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(("file", "old", "new", "message"), [
    ("task_exe_time", "T_3,13,8,17", "T_3,13,eight,17", r"task_exe_time\.csv: line 5: a value is not a number"),
    ("task_exe_time", "T_3,13,8,17", "T_3,13,8", r"task_exe_time\.csv: line 5 has 3 fields, the header 4"),
    # blank lines before it: still the file's line (found by review: they were dropped before numbering)
    ("task_exe_time", "T_3,13,8,17", "\n\nT_3,13,eight,17", r"task_exe_time\.csv: line 7: a value is not a number"),
    ("task_connectivity", "T9,0,0,0,0,0,0,0,0,0,0", "T9,5,0,0,0,0,0,0,0,0,0",
     r"task_connectivity\.csv: the graph has a cycle through"),
    ("resource_BW", "P_1,1,0,1", "P_1,0,0,1", r"resource_BW\.csv: bandwidth between different processors must be > 0"),
    # each value and label where its row is read, with the line (found by review: no line; a repeated task
    # label in the execution times was blamed on the connectivity file)
    ("resource_BW", "P_2,1,1,0", "P_2,1,1,-3", r"resource_BW\.csv: line 4: values must be finite and >= 0"),
    ("task_exe_time", "T_3,13,8,17", "T_3,-13,8,17", r"task_exe_time\.csv: line 5: values must be finite and >= 0"),
    ("task_exe_time", "T_4,12,13,10", "T_4,nan,13,10", r"task_exe_time\.csv: line 6: values must be finite and >= 0"),
    ("task_exe_time", "T_1,13,19,18", "T_0,13,19,18", r"task_exe_time\.csv: line 3: the row label 'T_0' is on line 2 too"),
])  # fmt: skip
def test_a_bad_file_is_named_with_the_reason(topcuoglu_csvs: Path, tmp_path: Path, file: str, old: str, new: str,
                                             message: str) -> None:  # fmt: skip
    d = copy(topcuoglu_csvs, tmp_path)
    edit(d / f"{PREFIX}_{file}.csv", old, new)
    with pytest.raises(WorkflowFormatError, match=message) as err:
        load_topcuoglu(d)
    assert err.value.path.endswith(f"{PREFIX}_{file}.csv")


def test_size_mismatch_and_missing_file(topcuoglu_csvs: Path, tmp_path: Path) -> None:
    d = copy(topcuoglu_csvs, tmp_path)
    lines = (d / f"{PREFIX}_task_exe_time.csv").read_text().splitlines()
    (d / f"{PREFIX}_task_exe_time.csv").write_text("\n".join(lines[:-1]) + "\n")  # 9 tasks
    with pytest.raises(WorkflowFormatError, match=r"connectivity\.csv: connectivity is 10×10, but .* has 9 tasks"):
        load_topcuoglu(d)
    (d / f"{PREFIX}_resource_BW.csv").unlink()
    with pytest.raises(WorkflowFormatError, match=r"resource_BW\.csv: cannot read"):
        load_topcuoglu(d)


def test_a_file_that_is_not_utf8_is_named_not_a_traceback(topcuoglu_csvs: Path, tmp_path: Path) -> None:
    """(Found by review: a UnicodeDecodeError's traceback from ``semsched bench dag``.)"""
    d = copy(topcuoglu_csvs, tmp_path)
    path = d / f"{PREFIX}_task_exe_time.csv"
    path.write_bytes(path.read_bytes().replace(b"T_3", b"T_\xff", 1))
    with pytest.raises(WorkflowFormatError, match=r"task_exe_time\.csv: not a UTF-8 CSV file"):
        load_topcuoglu(d)
