"""The CP-SAT DAG solver, the analytic lower bounds and ``semsched bench dag-bounds`` on tiny DAGs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ops.bench.dag_cpsat import solve_exact
from ops.bench.dag_lower_bounds import analytic_bounds, comm_heads_tails, comm_path_bound
from ops.cli.main import app
from ops.workflows import load_topcuoglu, topcuoglu_dir
from scheduling.dag import (
    DagGeneratorConfig,
    DagProblem,
    Platform,
    Schedule,
    TaskGraph,
    check_schedule,
    generate_dag,
)
from scheduling.dag.schedulers import get_dag_scheduler
from scheduling.metrics.dag import critical_path_min_length


def _heft(problem: DagProblem) -> Schedule:
    return get_dag_scheduler("heft").schedule(problem)


def _broken(problem: DagProblem, s: Schedule) -> Schedule:
    """``s`` with one rule broken: a child starting when its parent ends although they run on
    different processors with a transfer between them, or else two tasks overlapping."""
    g = problem.graph
    comm = problem.platform.comm_cost(g.data, s.proc[g.src], s.proc[g.dst])
    start, finish = s.start.copy(), s.finish.copy()
    remote = np.flatnonzero(comm > 1e-6)
    if len(remote):
        k = int(remote[0])
        j = int(g.dst[k])
        start[j] = s.finish[g.src[k]]
    else:  # everything on one processor: start the second task with the first
        j = int(np.argsort(s.start)[1])
        start[j] = s.start[np.argsort(s.start)[0]]
    finish[j] = start[j] + problem.costs[j, s.proc[j]]
    return Schedule(s.proc.copy(), start, finish)


def test_topcuoglu_graph_solved_to_optimality_below_heft() -> None:
    if not topcuoglu_dir().is_dir():
        pytest.skip("shared workflows not found (set SEMSCHED_DATA_DIR)")
    problem = load_topcuoglu()
    heft = _heft(problem)
    res = solve_exact(problem, heft, time_limit_s=10, workers=2)
    assert heft.makespan == 80.0
    assert res.optimal and res.makespan <= heft.makespan and res.makespan == pytest.approx(73.0)
    assert res.lower_bound == pytest.approx(res.makespan)
    assert check_schedule(problem, res.schedule) == []
    assert check_schedule(problem, _broken(problem, res.schedule)) != []


def test_small_random_dag_bounds_hold_and_checker_rejects_broken_schedule() -> None:
    problem = generate_dag(DagGeneratorConfig(tasks_min=12, tasks_max=12, processors=3), 7)
    heft = _heft(problem)
    res = solve_exact(problem, heft, time_limit_s=10, workers=2)
    assert res.optimal and res.status == "optimal"
    assert res.makespan <= heft.makespan + 1e-9
    assert check_schedule(problem, res.schedule) == []
    assert check_schedule(problem, _broken(problem, res.schedule)) != []
    # rounding (x1000, costs rounded down) moves the real makespan by a few units at most
    assert abs(res.rounding_drift) < problem.n_tasks / res.scale
    bounds = analytic_bounds(problem)
    assert bounds["cp_min"] == pytest.approx(critical_path_min_length(problem))
    assert bounds["comm_path"] >= bounds["cp_min"] - 1e-9
    assert all(v <= res.makespan + 1e-6 for v in bounds.values())
    assert bounds["best"] <= res.lower_bound <= res.makespan + 1e-9


def test_expensive_transfer_keeps_a_chain_on_one_processor() -> None:
    graph = TaskGraph.from_edges(["a", "b"], [(0, 1, 100.0)])
    problem = DagProblem(graph, Platform.uniform(2), np.array([[3.0, 2.0], [1.0, 4.0]]))
    res = solve_exact(problem, _heft(problem), time_limit_s=5, workers=2)
    # both on P0: 3 + 1 = 4; both on P1: 2 + 4 = 6; split: + 100 (HEFT puts a on P1, its EFT, and gets 6)
    assert res.optimal and res.makespan == pytest.approx(4.0)
    assert res.schedule.proc.tolist() == [0, 0]


def test_comm_path_bound_serialises_co_located_parents() -> None:
    # a, b -> j, transfers of 10: j waits 11 with a parent elsewhere, 2 with both parents on its processor
    graph = TaskGraph.from_edges(["a", "b", "j"], [(0, 2, 10.0), (1, 2, 10.0)])
    problem = DagProblem(graph, Platform.uniform(2), np.ones((3, 2)))
    head, tail = comm_heads_tails(problem)
    assert head.tolist() == [0.0, 0.0, 2.0]
    assert tail.tolist() == [1.0, 1.0, 0.0]
    assert comm_path_bound(problem) == pytest.approx(3.0)
    assert critical_path_min_length(problem) == pytest.approx(2.0)


def test_cli_writes_report_with_consistent_slrs(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200"})
    ok = runner.invoke(app, ["bench", "dag-bounds", "--dags", "2", "--tasks-min", "20", "--tasks-max", "24", "--time-limit", "2",
                             "--workers", "2", "--out", str(tmp_path)])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    data = json.loads((tmp_path / "bench-dag-bounds.json").read_text())
    rows = data["results"]["random"]
    assert [r["dag"] for r in rows] == ["held-out-0-0", "held-out-0-1"]
    assert all(1.0 <= r["slr_lower"] <= r["slr_best"] + 1e-9 <= r["slr_heft"] + 2e-9 for r in rows)
    assert data["command"].startswith("semsched bench dag-bounds --dags 2 ")
    assert "max possible vs HEFT" in (tmp_path / "bench-dag-bounds.md").read_text()
    assert (tmp_path / "bench-dag-bounds-slr-cdf.png").read_bytes()[:4] == b"\x89PNG"
    bad = runner.invoke(app, ["bench", "dag-bounds", "--time-limit", "0", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "time-limit" in bad.output
