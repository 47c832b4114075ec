import json

from typer.testing import CliRunner

from ops.bench.simulation import load_trace_workload
from ops.cli.main import app
from scheduling.simulator import offered_peak


def test_bench_trace_writes_report_json_and_plots(tmp_path):
    result = CliRunner().invoke(app, ["bench", "trace", "--trace", "openb", "--limit", "400", "--load", "high",
                                      "--policies", "best-fit,sjf-oracle+best-fit", "--heterogeneity", "low",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "bench-trace-openb.json").read_text())
    rows = {r["policy"]: r for r in data["results"]}
    assert set(rows) == {"best-fit", "sjf-oracle+best-fit"}
    jobs = data["setting"]["jobs"]
    for r in rows.values():
        assert r["finished"] + r["rejected"] == jobs  # nothing lost
        assert r["jct_mean"] >= r["queue_mean"] >= 0
    native = load_trace_workload("openb", limit=400)
    assert data["setting"]["offered_peak"] > 10 * offered_peak(native.nodes, native.jobs)  # the load was raised
    for name in ("jct-cdf", "queue-cdf", "queue", "gpu-allocation"):
        assert (tmp_path / f"bench-trace-openb-{name}.png").stat().st_size > 1000
    assert "| best-fit |" in (tmp_path / "bench-trace-openb.md").read_text()


def test_bench_trace_rejects_a_bad_load_and_an_unknown_policy(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(app, ["bench", "trace", "--limit", "50", "--load", "lots", "--policies", "best-fit",
                              "--out", str(tmp_path)])  # fmt: skip
    assert bad.exit_code == 2 and "load must be" in bad.output
    unknown = runner.invoke(app, ["bench", "trace", "--policies", "nope", "--out", str(tmp_path)])
    assert unknown.exit_code == 2 and "nope" in unknown.output


def test_bench_trace_names_the_bad_line_and_exits_non_zero(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "job_submitted", "job_id": "a", "cpu_milli": 1000, "event_time": "2026-01-01T00:00:00Z"}\n'
                   'not json\n')  # fmt: skip
    result = CliRunner().invoke(app, ["bench", "trace", "--trace", "jsonl", "--path", str(bad),
                                      "--policies", "best-fit", "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 1
    assert f"{bad}:2:" in result.output.replace("\n", "")


def test_bench_trace_refuses_the_learned_policy_without_a_model(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(tmp_path / "no-model-here"))
    result = CliRunner().invoke(app, ["bench", "trace", "--limit", "50", "--policies", "learned,best-fit",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2 and "no model" in result.output and "semsched train" in result.output
    assert not (tmp_path / "bench-trace-openb.json").exists()


def test_a_load_level_the_slice_cannot_reach_is_flagged() -> None:
    from ops.bench.simulation import load_shortfall
    from scheduling.simulator import LoadPlan

    assert load_shortfall("extreme", LoadPlan(40.0, 1, 1.19)) is None  # within 10 % of 120 %
    short = load_shortfall("extreme", LoadPlan(900.0, 8, 0.77))
    assert short is not None and "77%" in short and "120%" in short and "8 superposed" in short
    assert load_shortfall("native", LoadPlan(1.0, 1, 0.05)) is None and load_shortfall("250x", LoadPlan(250, 1, 0.1)) is None


def test_bench_trace_reports_the_floor_of_apps_limited_per_node(tmp_path):
    """The first 1,000 Google 2011 events on 20 nodes: one job's 472 tasks, at most one per node,
    queue whatever the placement; every policy's queueing of them is at or above the floor."""
    result = CliRunner().invoke(app, ["bench", "trace", "--trace", "google2011", "--limit", "1000", "--nodes", "20",
                                      "--load", "native", "--policies", "best-fit,least-allocated",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "bench-trace-google2011.json").read_text())
    (floor,) = [b for b in data["instance_limit_floor"] if b["app"] == "6252026869"]
    assert (floor["tasks"], floor["slots"]) == (472, 20) and floor["wait_s"] > 0
    rows = data["tables"]["Queueing behind per-node instance limits (s)"]
    assert {r["policy"] for r in rows} == {"best-fit", "least-allocated"}
    for r in rows:
        assert r["limited_queue_mean"] >= r["floor_mean"] > 0 and r["above_floor_pct"] >= 0
        assert r["queue_mean_all"] >= r["floor_over_all_jobs"] and r["not_started"] == 0
    # what the loader noted beside what the simulator left out (found by review: only the latter was said)
    assert "the loader noted:" in (tmp_path / "bench-trace-google2011.md").read_text()
    assert "Queueing behind per-node instance limits" in (tmp_path / "bench-trace-google2011.md").read_text()


def test_bench_trace_refuses_a_learned_ordering_whose_duration_model_does_not_load(tmp_path, monkeypatch):
    """It ran sjf-predicted's order and reported it as sjf-learned's, exit 0, without a word."""
    monkeypatch.setenv("SEMSCHED_DURATION_MODEL_DIR", str(tmp_path / "no-duration-model"))
    result = CliRunner().invoke(app, ["bench", "trace", "--limit", "50", "--policies", "sjf-learned+best-fit",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "duration model" in text and "semsched train-duration" in text
    assert not (tmp_path / "bench-trace-openb.json").exists()


def test_a_bad_line_with_brackets_in_it_is_quoted_as_it_is(tmp_path):
    """Found by review: the line's text went into rich markup, so ``[/x]`` crashed the command with a
    MarkupError traceback (and ``[bold]`` vanished from the message)."""
    (tmp_path / "openb_node_list_gpu_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n")
    (tmp_path / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "p0,12000,16384,1,1000,,LS,Running,0,100,0\np1,[/x][bold],1,1,1,,LS,Running,1,4,3\n")  # fmt: skip
    result = CliRunner().invoke(app, ["bench", "trace", "--trace", "openb", "--path", str(tmp_path),
                                      "--policies", "best-fit", "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 1, result.output
    out = result.output.replace("\n", "")
    assert "openb_pod_list_default.csv:3:" in out and "'[/x][bold]'" in out


def test_the_seed_reaches_a_random_placement(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Found by review: `bench trace --seed` never reached `random` (seeded 0 every run), so with equal node
    speeds its rows were the same for every seed."""
    from rich.console import Console

    import ops.bench.simulation as simulation
    from scheduling.simulator import SimConfig, SimJob
    from tests.scheduling.sched_builders import job, node

    asked: list[tuple[str, dict]] = []
    real = simulation.get_policy
    monkeypatch.setattr(simulation, "get_policy", lambda name, **kw: asked.append((name, kw)) or real(name, **kw))
    nodes = [node(f"n{i}", gpus=1) for i in range(4)]
    jobs = [SimJob(job(f"j{i}", gpus=1, submit_time=float(i)), 10.0) for i in range(3)]
    results = simulation.run_policies(nodes, jobs, ["random", "las+random", "best-fit"], SimConfig(seed=7),
                                      Console(quiet=True))  # fmt: skip
    assert asked == [("random", {"seed": 7}), ("las+random", {"seed": 7}), ("best-fit", {})]
    assert [r.metrics.finished for r in results] == [3, 3, 3]
