"""The WfInstances (WfFormat 1.5) loader: every shared file loads and schedules validly;
the documented assumptions (edges, file sizes, cores, speeds, communication) hold; a bad
file is named with the reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ops.workflows import MachineSpec, WorkflowFormatError, load_wfinstance
from scheduling.dag import assert_valid_schedule
from scheduling.dag.schedulers import get_dag_scheduler

EXPECTED = {  # file stem: (tasks, recorded makespan in s, processors = cores of the recorded machine)
    "1000genome-chameleon-2ch-100k-001": (52, 776.0, 48),
    "bacass-dirt02-001": (11, 4243.0, 1),
    "epigenomics-chameleon-hep-1seq-100k-001": (41, 594.0, 48),
    "montage-chameleon-2mass-005d-001": (58, 1060.0, 48),
    "srasearch-chameleon-10a-001": (22, 3488.0, 48),
}


def test_every_shared_file_loads_and_every_scheduler_is_valid(wfinstance_paths: list[Path]) -> None:
    assert {p.stem for p in wfinstance_paths} == set(EXPECTED)
    for path in wfinstance_paths:
        wf = load_wfinstance(path)
        tasks, recorded, procs = EXPECTED[path.stem]
        assert (wf.problem.n_tasks, wf.recorded_makespan_s, wf.problem.n_procs) == (tasks, recorded, procs)
        for name in ("heft", "cpop", "fifo"):
            assert_valid_schedule(wf.problem, get_dag_scheduler(name).schedule(wf.problem))
        hetero = load_wfinstance(path, machines=[MachineSpec("slow", 2, 600.0), MachineSpec("fast", 3, 2400.0)])
        for name in ("heft", "cpop", "fifo"):
            assert_valid_schedule(hetero.problem, get_dag_scheduler(name).schedule(hetero.problem))


def test_montage_edges_data_and_runtimes_follow_the_file(wfinstance_paths: list[Path]) -> None:
    path = next(p for p in wfinstance_paths if p.stem.startswith("montage"))
    doc = json.loads(path.read_text())
    wf = load_wfinstance(path)
    spec = doc["workflow"]["specification"]
    sizes = {f["id"]: f["sizeInBytes"] for f in spec["files"]}
    tasks = {t["id"]: t for t in spec["tasks"]}
    g = wf.problem.graph
    assert g.n_edges == sum(len(t["parents"]) for t in spec["tasks"])
    for k in range(g.n_edges):
        a, b = tasks[g.names[g.src[k]]], tasks[g.names[g.dst[k]]]
        assert g.names[g.src[k]] in b["parents"]
        assert g.data[k] == sum(sizes[f] for f in set(a["outputFiles"]) & set(b["inputFiles"]))
    runtimes = {t["id"]: t["runtimeInSeconds"] for t in doc["workflow"]["execution"]["tasks"]}
    first = g.names[0]
    assert np.all(wf.problem.costs[0] == runtimes[first])  # one machine: every core as fast as recorded
    assert wf.problem.platform.names[:2] == ("mem#0", "mem#1")
    assert np.all(wf.problem.platform.comm_cost(1e9, 0, np.arange(48)) == 0)  # cores of one machine


def doc(**changes: Any) -> dict[str, Any]:
    """A tiny valid WfFormat 1.5 document: a → b sharing file f (1,000 bytes), b → c sharing none."""
    base = {"name": "tiny", "schemaVersion": "1.5", "runtimeSystem": {"name": "Pegasus", "version": "5.0"},
            "workflow": {
                "specification": {
                    "tasks": [
                        {"id": "a", "name": "a", "parents": [], "children": ["b"], "inputFiles": [],
                         "outputFiles": ["f", "g"]},
                        {"id": "b", "name": "b", "parents": ["a"], "children": [], "inputFiles": ["f"],
                         "outputFiles": []},
                        {"id": "c", "name": "c", "parents": ["b"], "children": [], "inputFiles": ["g"],
                         "outputFiles": []}],
                    "files": [{"id": "f", "sizeInBytes": 1000}, {"id": "g", "sizeInBytes": 5}]},
                "execution": {
                    "makespanInSeconds": 30.0,
                    "tasks": [{"id": "a", "runtimeInSeconds": 10.0, "machines": ["m1"]},
                              {"id": "b", "runtimeInSeconds": 4.0, "machines": ["m2"]},
                              {"id": "c", "runtimeInSeconds": 2.0}],
                    "machines": [{"nodeName": "m1", "cpu": {"coreCount": 2, "speedInMHz": 1000}},
                                 {"nodeName": "m2", "cpu": {"coreCount": 1, "speedInMHz": 3000}}]}}}  # fmt: skip
    out = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
    return out


def write(tmp_path: Path, document: Any, name: str = "tiny.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_speeds_scale_runtimes_and_machines_pay_for_communication(tmp_path: Path) -> None:
    wf = load_wfinstance(write(tmp_path, doc()), bandwidth=100.0, latency=0.5)
    p = wf.problem
    assert p.platform.names == ("m1#0", "m1#1", "m2#0")
    # a ran on m1 (1000 MHz), b on m2 (3000 MHz), c names no machine: the mean, 2000 MHz
    assert p.costs.tolist() == [[10, 10, 10 * 1000 / 3000], [12, 12, 4], [4, 4, 2 * 2000 / 3000]]
    assert p.graph.data.tolist() == [1000.0, 0.0]  # c reads g, but g comes from a, not its parent b
    assert p.platform.comm_cost(1000.0, 0, 1) == 0.0  # two cores of m1
    assert p.platform.comm_cost(1000.0, 0, 2) == pytest.approx(0.5 + 1000 / 100)
    assert wf.recorded_makespan_s == 30.0 and wf.runtime_system == "Pegasus 5.0"
    capped = load_wfinstance(write(tmp_path, doc()), max_cores_per_machine=1)
    assert capped.problem.platform.names == ("m1#0", "m2#0")
    other = load_wfinstance(write(tmp_path, doc()), machines=[MachineSpec("x", 1, 500.0), MachineSpec("y", 1)])
    assert other.problem.costs[0].tolist() == [20.0, 5.0]  # y has no speed: the recorded mean, 2000 MHz


@pytest.mark.parametrize(("document", "message"), [
    ("{not json", "not JSON"),
    (doc(schemaVersion="1.4"), "WfFormat schemaVersion 1.4 is not supported"),
    (doc(workflow__specification__tasks__1__parents=["zz"]), "task 'b' links to unknown task 'zz'"),
    (doc(workflow__specification__tasks__0__parents=["c"]), "the graph has a cycle through"),
    (doc(workflow__execution__tasks__1__runtimeInSeconds=-1), r"task 'b' has no runtimeInSeconds >= 0 \(got -1\)"),
    (doc(workflow__execution__tasks=[{"id": "a", "runtimeInSeconds": 1}]), "task 'b' has no entry in"),
    (doc(workflow__specification__files=[{"id": "g", "sizeInBytes": 5}]), "file 'f' .* has no sizeInBytes"),
    (doc(workflow__execution__machines=[]), "workflow.execution.machines is empty"),
    (doc(workflow__execution__machines__0__cpu={"coreCount": 0}), "machine 'm1' has coreCount 0"),
    (doc(workflow__specification={"files": []}), "missing workflow.specification.tasks"),
    (doc(workflow__specification__tasks__1__id="a"), "task id 'a' appears twice"),
    # found by review: the last of two entries won silently, a boolean ran 1 s, a million cores took all memory
    (doc(workflow__execution__tasks__2__id="a"), "task 'a' appears twice in workflow.execution.tasks"),
    (doc(workflow__execution__tasks__1__runtimeInSeconds=True), r"task 'b' has no runtimeInSeconds >= 0 \(got True\)"),
    (doc(workflow__execution__machines__0__cpu={"coreCount": True}), "machine 'm1' has coreCount True"),
    (doc(workflow__execution__machines__0__cpu={"coreCount": 1_000_000}), "machine 'm1' has coreCount 1000000"),
    # found by review: a traceback, and a machine named by the string's first letter
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (doc(workflow__execution__tasks__0__machines="m1"), "task 'a': machines must be a list of machine names"),
    # found by review: kept, and shown as the recorded makespan
    (doc(workflow__execution__makespanInSeconds=-5), "execution.makespanInSeconds must be a number > 0, not -5"),
])  # fmt: skip
def test_a_bad_file_is_named_with_the_reason(tmp_path: Path, document: Any, message: str) -> None:
    path = write(tmp_path, document, "bad.json")
    with pytest.raises(WorkflowFormatError, match=message) as err:
        load_wfinstance(path)
    assert str(err.value).startswith(f"{path}: ")


def test_integer_task_ids_link_as_their_strings(tmp_path: Path) -> None:
    """Found by review: ids were indexed as strings but links looked up raw, so an integer id gave
    "task 0 links to unknown task 0"."""
    document = doc(workflow__specification__tasks__1__id=7, workflow__specification__tasks__0__children=[7],
                   workflow__specification__tasks__2__parents=[7], workflow__execution__tasks__1__id=7)  # fmt: skip
    problem = load_wfinstance(write(tmp_path, document)).problem
    assert problem.graph.names == ("a", "7", "c") and problem.graph.n_edges == 2


def test_a_byte_order_mark_and_gzip_are_read_as_the_trace_loaders_read_them(tmp_path: Path) -> None:
    """Found by review: a file saved with a BOM was "not JSON: Unexpected UTF-8 BOM", a gzip one a decode
    error; the trace loaders take both (ops/traces/base.py, ``open_text``)."""
    import gzip
    import json

    text = json.dumps(doc())
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "zipped.json").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "latin1.json").write_bytes(text.replace('"a"', '"\xe9"', 1).encode("latin-1"))
    for name in ("bom.json", "zipped.json"):
        assert load_wfinstance(tmp_path / name).recorded_makespan_s == 30.0
    with pytest.raises(WorkflowFormatError, match="not JSON: invalid UTF-8"):
        load_wfinstance(tmp_path / "latin1.json")
