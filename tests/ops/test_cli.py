"""The `semsched` command line: every command answers --help; `schema` writes JSON Schema
that producers can validate against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from ops.cli.main import app
from scheduling.events import JobSubmitted
from tests.ops.bench.test_bench_fill import NODES, POD_HEADER

runner = CliRunner()


def _command_paths() -> list[list[str]]:
    root = get_command(app)
    paths: list[list[str]] = []

    def walk(cmd: Any, prefix: list[str]) -> None:
        paths.append(prefix)
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*prefix, name])

    walk(root, [])
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "semsched")
def test_every_command_has_help(path: list[str]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_the_main_commands_exist() -> None:
    names = {" ".join(p) for p in _command_paths()}
    for expected in ("demo", "worker", "agents", "replay", "schema", "sql", "explain", "db migrate",
                     "kafka start", "kafka stop", "kafka status", "bench pipeline"):  # fmt: skip
        assert expected in names


def test_schema_writes_one_schema_per_topic(tmp_path: Path) -> None:
    result = runner.invoke(app, ["schema", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "jobs.submitted.schema.json" in files and "actions.schema.json" in files and len(files) == 6
    sch = json.loads((tmp_path / "jobs.submitted.schema.json").read_text())
    props = sch["properties"]
    assert {"schema_version", "event_id", "event_time", "job_id", "gpu_milli"} <= set(props)
    assert "job_id" in sch["required"]
    # an event the models emit is valid against the schema's required fields and types
    ev = json.loads(JobSubmitted(job_id="j").model_dump_json())
    assert set(sch["required"]) <= set(ev)
    assert props["cpu_milli"]["minimum"] == 0


def test_unknown_policy_is_a_clear_error() -> None:
    result = runner.invoke(app, ["worker", "--policy", "no-such-policy"])
    assert result.exit_code != 0
    assert "no-such-policy" in result.output and "best-fit" in result.output


def test_a_malformed_torch_thread_count_stops_the_learned_worker_at_start(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Not a worker whose every decision falls back to the heuristic for a typo."""
    monkeypatch.setenv("SEMSCHED_TORCH_THREADS", "two")
    result = runner.invoke(app, ["worker", "--policy", "las+learned"])
    assert result.exit_code == 2
    assert "SEMSCHED_TORCH_THREADS" in result.output and "'two'" in result.output


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("SEMSCHED_INFERENCE", "bogus", "SEMSCHED_INFERENCE must be one of in-process, triton, not 'bogus'"),
    ("SEMSCHED_TRITON_DEADLINE_MS", "abc", "SEMSCHED_TRITON_DEADLINE_MS must be a number of milliseconds above 0, not 'abc'"),
    ("SEMSCHED_TRITON_ENCODE_DEADLINE_MS", "-5", "SEMSCHED_TRITON_ENCODE_DEADLINE_MS must be a number of milliseconds"),
    ("SEMSCHED_TRITON_STEP_DEADLINE_MS", "nan", "above 0 (0: none), not 'nan'"),
    ("SEMSCHED_TRITON_SHARED_MEMORY", "yes", "SEMSCHED_TRITON_SHARED_MEMORY must be auto or off, not 'yes'"),
])  # fmt: skip
def test_malformed_inference_settings_stop_the_learned_worker_at_start(monkeypatch, variable: str, value: str,
                                                                       says: str) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """SEMSCHED_INFERENCE=bogus or a deadline of 'abc' ran a worker whose every step FGD decided."""
    monkeypatch.delenv("SEMSCHED_TORCH_THREADS", raising=False)
    monkeypatch.setenv("SEMSCHED_INFERENCE", "triton")
    monkeypatch.setenv(variable, value)
    result = runner.invoke(app, ["worker", "--policy", "learned"])
    assert result.exit_code == 2
    assert says in " ".join(result.output.replace("│", " ").split()), result.output


def test_malformed_lookahead_settings_stop_the_lookahead_worker_at_start(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SEMSCHED_TORCH_THREADS", raising=False)
    monkeypatch.setenv("SEMSCHED_LOOKAHEAD_DEPTH", "deep")
    result = runner.invoke(app, ["worker", "--policy", "las+learned-lookahead"])
    assert result.exit_code == 2
    assert "SEMSCHED_LOOKAHEAD_DEPTH" in result.output and "'deep'" in result.output


def test_the_default_debounce_fits_any_step(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A short step alone keeps its settings readable, in this process and in a local stack's children
    (found by the review of the change: SEMSCHED_STEP=0.02 alone was refused, and so was `bench pipeline
    --step 0.02`'s worker)."""
    from ops.local_stack import child_env
    from streams.settings import Settings

    monkeypatch.delenv("SEMSCHED_EVENT_DEBOUNCE", raising=False)
    monkeypatch.setenv("SEMSCHED_STEP", "0.02")
    assert Settings().event_debounce_s == 0.02
    monkeypatch.delenv("SEMSCHED_STEP")
    env = child_env(Settings().model_copy(update={"step_s": 0.02}))
    monkeypatch.setenv("SEMSCHED_STEP", env["SEMSCHED_STEP"])
    monkeypatch.setenv("SEMSCHED_EVENT_DEBOUNCE", env["SEMSCHED_EVENT_DEBOUNCE"])
    assert Settings().event_debounce_s == 0.02  # what the child reads


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("SEMSCHED_PARTITIONS", "abc", "SEMSCHED_PARTITIONS must be an integer, not 'abc'"),
    ("SEMSCHED_PARTITIONS", "0", "SEMSCHED_PARTITIONS must be at least 1, not 0"),
    ("SEMSCHED_REPLICATION_FACTOR", "0", "SEMSCHED_REPLICATION_FACTOR must be at least 1, not 0"),
    ("SEMSCHED_ARCHIVE_FETCH_WAIT", "0", "SEMSCHED_ARCHIVE_FETCH_WAIT must be at least 10, not 0"),
    ("SEMSCHED_ARCHIVE_FETCH_WAIT", "60000", "SEMSCHED_ARCHIVE_FETCH_WAIT must be at most 5000, not 60000"),
    ("SEMSCHED_STEP", "fast", "SEMSCHED_STEP must be a number, not 'fast'"),
    ("SEMSCHED_FALLBACK_POLICY", "nope", "SEMSCHED_FALLBACK_POLICY must be a heuristic placement policy"),
    ("SEMSCHED_NODE_SILENT", "5", "SEMSCHED_NODE_SILENT must be 0 (never) or more than the agents' report interval"),
    # (found by review: a debounce of inf, or of 50 read as milliseconds, slept for ever or 50 s before a step)
    ("SEMSCHED_EVENT_DEBOUNCE", "inf", "SEMSCHED_EVENT_DEBOUNCE must be at most SEMSCHED_STEP"),
    ("SEMSCHED_EVENT_DEBOUNCE", "50", "SEMSCHED_EVENT_DEBOUNCE must be at most SEMSCHED_STEP"),
    # (found by review: taken, then the broker refused the group join, fatal to the worker's consumer)
    ("SEMSCHED_SESSION_TIMEOUT", "3", "SEMSCHED_SESSION_TIMEOUT must be at least 6, not 3"),
    ("SEMSCHED_SESSION_TIMEOUT", "3600", "SEMSCHED_SESSION_TIMEOUT must be at most 1800, not 3600"),
])  # fmt: skip
def test_a_setting_that_cannot_be_read_is_one_line_naming_it_and_exit_2(variable: str, value: str, says: str,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    import os
    import subprocess
    import sys

    env = {**os.environ, variable: value, "SEMSCHED_STATE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "ops.cli.main", "sql", "SELECT 1"], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["bench", "trace", "--step", "0"], "must be a finite number > 0"),
    (["bench", "trace", "--limit", "300", "--load", "nanx"], "load factor must be a finite number > 0"),
    (["bench", "trace", "--limit", "300", "--load", "-2x"], "load factor must be a finite number > 0"),
    (["bench", "pipeline", "--rate", "-5"], "--rate"),
    (["bench", "archiver", "--rate", "0"], "must be a finite number > 0"),
    (["bench", "fill", "--seeds", "5-1"], "no seeds in '5-1'"),
    (["replay", "openb", "--dry-run", "--limit", "-1"], "--limit"),
    (["replay", "openb", "--dry-run", "--speed", "-3"], "--speed"),
    (["replay", "openb", "--dry-run", "--max-gap", "-1"], "max_gap must be >= 0"),
    (["replay", "openb", "--dry-run", "--max-gap", "nan"], "max_gap must be >= 0"),
    (["replay", "openb", "--dry-run", "--start-offset", "nan"], "start_offset must be a number"),
    (["replay", "openb", "--dry-run", "--max-duration", "nan"], "max_duration_s must be a number"),
    (["worker", "--step", "-1"], "must be a finite number > 0"),
    (["replay", "openb", "--dry-run", "--min-duration", "100", "--max-duration", "10"], "max_duration_s must be >="),
    # a black-box review of every command: each of these ran on (an empty report, a model trained on
    # nothing, a simulator step of inf with every job vanished, a traceback at the end)
    (["bench", "trace", "--step", "inf"], "--step"),
    (["bench", "trace", "--nodes", "0"], "--nodes"),
    (["bench", "trace", "--seed", "-1"], "--seed"),
    (["bench", "sweep", "--sweeps", ","], "--sweeps"),
    (["bench", "sweep", "--steps", "0,nan"], "--steps"),
    (["bench", "sweep", "--pending", "-5"], "--pending"),
    (["bench", "sjf", "--nodes", "-3"], "--nodes"),
    (["bench", "dag", "--ccr", "inf"], "--ccr"),
    (["bench", "dag", "--dags", "0", "--no-workflows"], "--dags 0 without the workflows runs nothing"),  # (an empty report, exit 0)
    (["bench", "dag-bounds", "--dags", "0"], "--dags 0 without the workflows runs nothing"),
    (["bench", "learned", "--out", "/dev/null"], "is a file"),  # (refused after the timings)
    (["bench", "step", "--policies", ",,"], "names no policy"),  # (every policy, the learned ones too)
    (["replay", "openb", "--dry-run", "--option", "bogus=1"], "the openb loader has no option 'bogus'"),
    (["bench", "dag-bounds", "--time-limit", "nan"], "--time-limit"),
    (["bench", "step", "--out", "{tmp}"], "--out"),  # (a directory: the results were lost at the end)
    (["train", "--epochs", "0"], "--epochs"),
    # validation seeds that also train (or fine-tune) the model validate nothing (the benchmarks review)
    (["train", "--val-seeds", "0-1"], "seeds [0, 1] are validation seeds"),
    (["train", "--rl-episodes", "2", "--rl-seeds", "0-9"], "seeds [8, 9] are validation seeds"),
    (["bench", "fill", "--seeds", "42,43,42"], "seed 42 is named twice"),
    (["train", "--batch", "0"], "--batch"),
    (["train", "--lr", "nan"], "--lr"),
    (["train", "--text-dim", "0"], "--text-dim"),
    (["train", "--rl-minutes", "-1"], "--rl-minutes"),
    (["train", "--rl-rate", "nan"], "--rl-rate"),
    (["train-dag", "--rl-lr", "nan"], "--rl-lr"),
    (["models", "promote", "{tmp}", "--sim-jobs", "-5"], "--sim-jobs"),
    (["models", "promote", "{tmp}", "--node-sample", "0"], "--node-sample"),
    (["models", "promote", "{tmp}", "--sim-jobs", "5", "--sim-load", "bogus"], "--sim-load"),
    (["models", "promote", "{tmp}", "--latency-budget-ms", "nan"], "--latency-budget-ms"),
    (["demo", "--jobs", "0"], "--jobs"),
    (["demo", "--timeout", "nan"], "--timeout"),  # (review: it started the whole stack, then gave up at once)
    (["serve", "--grpc-port", "70000"], "--grpc-port"),
    (["kafka", "start", "--port", "70000"], "--port"),
    (["kafka", "status", "--port", "0", "-d", "{tmp}/kd"], "--port"),  # (review: it reported on port 19092)
    (["kafka", "start", "--port", "65535", "-d", "{tmp}/kd"], "--port: the controller port 65536 is not a TCP port"),  # (OverflowError)
    (["kafka", "start", "--port", "19560", "--controller-port", "19560", "-d", "{tmp}/kd"], "--controller-port"),
    # each a traceback after the run (--compare nonsense, --schedulers '', --epochs 0) or an empty report
    # that overwrote the last one, exit 0 (--repeat 0, --traces '')
    (["bench", "learned", "--compare", "nonsense", "--pending", "8"], "nonsense"),
    (["bench", "learned", "--repeat", "0"], "--repeat"),
    (["bench", "triton", "--repeat", "0"], "--repeat"),
    (["bench", "triton", "--nodes", "0"], "--nodes needs at least one size"),
    (["bench", "dag", "--schedulers", ""], "--schedulers needs at least one scheduler"),
    (["bench", "duration", "--traces", ""], "--traces and --encoders need at least one name each"),
    (["bench", "duration", "--epochs", "0"], "--epochs"),
    (["agents", "--fail-rate", "1.5"], "--fail-rate"),  # these three started agents that ran with them
    (["agents", "--speed", "0"], "--speed"),
    (["agents", "--speed", "-1"], "--speed"),
])  # fmt: skip
def test_options_out_of_range_are_refused_before_anything_runs(args: list[str], says: str, tmp_path: Path) -> None:
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.replace("│", " ").split()), result.output
    assert not any(tmp_path.iterdir()), "nothing written"


def test_bench_triton_given_a_model_that_does_not_load_says_why_in_one_line(tmp_path: Path) -> None:
    """Found by review: a 74-90 line traceback (here: a config.json that is a JSON list)."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("[1, 2, 3]")
    result = runner.invoke(app, ["bench", "triton", "--model", str(tmp_path / "m"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "config.json: not a JSON object (a list)" in result.output, result.output
    assert "Traceback" not in result.output


def test_bench_fill_names_the_bad_line_of_a_pod_list_and_exits_1(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    pods.write_text(f"{header}\nbroken,row\n")
    result = runner.invoke(app, ["bench", "fill", "--policies", "fgd", "--seeds", "42", "--pods", str(pods),
                                 "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 1 and f"{pods}:2:" in result.output.replace("\n", ""), result.output
    missing = runner.invoke(app, ["bench", "fill", "--policies", "fgd", "--pods", str(tmp_path / "nope.csv")])
    assert missing.exit_code == 1 and "cannot open" in missing.output, missing.output
    assert "nope.csv: cannot open" in missing.output.replace("\n", "")  # the file, not a line 0 of it


PODS = POD_HEADER + "".join(f"p{i:02d},1000,1024,1,500,,BE,Running,{i},,\n" for i in range(12))


def test_training_refuses_a_pod_list_with_a_bad_line_instead_of_thinning_it(tmp_path: Path) -> None:
    """train (and models promote, train --rl-from, the depth sweep) skipped the bad line and trained."""
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS.replace("p05,1000,", "p05,-5,"))
    r = runner.invoke(app, ["train", "--no-promote", "--out", str(tmp_path / "m"), "--pods", str(tmp_path / "pods.csv"),
                            "--nodes", str(tmp_path / "nodes.csv"), "--epochs", "1"])  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "pods.csv:7" in r.output and "cpu_milli" in r.output
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(("pods", "nodes", "why"), [
    (POD_HEADER + "p00,1000,1024,0,0,,BE,Running,0,,\n", NODES, "no pod asks for one"),
    (PODS, NODES.replace(",2,T4", ",0,"), "no node has one"),
])  # fmt: skip
def test_the_fill_benchmark_refuses_what_it_cannot_fill(pods: str, nodes: str, why: str, tmp_path: Path) -> None:
    """No GPU demand: the fill sequence cloned pods for ever (memory growing); no GPUs: a traceback."""
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "pods.csv").write_text(pods)
    r = runner.invoke(app, ["bench", "fill", "--pods", str(tmp_path / "pods.csv"), "--nodes", str(tmp_path / "nodes.csv"),
                            "--policies", "best-fit", "--seeds", "1", "--out", str(tmp_path / "out")])  # fmt: skip
    assert r.exit_code == 2 and why in r.output, r.output


def test_a_trace_of_nodes_without_jobs_is_refused_and_one_of_jobs_without_nodes_said(tmp_path: Path) -> None:
    """Found by review: a header-only openb pod file exited 0 (a replay would publish the 1,213 nodes alone): it
    exits 1 before anything is published, dry run or not (no broker here: a replay that got as far as Kafka
    would fail otherwise), also when the node list has a bad line. A header-only node list is said (the jobs
    may be meant for a cluster whose agents report its nodes)."""
    fixtures = Path(__file__).parents[1] / "fixtures" / "traces" / "alibaba-gpu-2023"
    pods = (fixtures / "openb_pod_list_default.csv").read_text().splitlines()
    nodes = (fixtures / "openb_node_list_gpu_node.csv").read_text().splitlines()
    (tmp_path / "header.csv").write_text(pods[0] + "\n")
    (tmp_path / "no_nodes.csv").write_text(nodes[0] + "\n")
    (tmp_path / "bad_node.csv").write_text("\n".join([*nodes[:3], "openb-node-x,1,1,1"]) + "\n")
    for node_list in (fixtures / "openb_node_list_gpu_node.csv", tmp_path / "bad_node.csv"):
        for dry in (["--dry-run"], ["--bootstrap", "127.0.0.1:1"]):
            result = runner.invoke(app, ["replay", "openb", "--path", str(tmp_path / "header.csv"),
                                         "-o", f"nodes_path={node_list}", *dry])  # fmt: skip
            assert result.exit_code == 1 and "no jobs in the trace (its inventory has" in result.output, result.output
    result = runner.invoke(app, ["replay", "openb", "--path", str(fixtures / "openb_pod_list_default.csv"),
                                 "-o", f"nodes_path={tmp_path / 'no_nodes.csv'}", "--dry-run"])  # fmt: skip
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "no nodes in the trace's inventory: its 54 jobs run only where" in said, said


@pytest.mark.parametrize(("trace", "name", "text"), [
    ("jsonl", "empty.jsonl", "# nothing but a comment\n\n"),
    # found by review: exit 0, for the loader's note that the job-events file beside it was missing
    ("google2011", "task_events.csv", ""),
    ("google2011", "task_events.csv", "\n\n"),
])
def test_replaying_a_trace_without_any_event_is_an_error(tmp_path: Path, trace: str, name: str, text: str) -> None:
    empty = tmp_path / name
    empty.write_text(text)
    result = runner.invoke(app, ["replay", trace, "--path", str(empty), "--dry-run"])
    assert result.exit_code == 1 and "no events in the trace" in result.output, result.output


@pytest.mark.parametrize("command", ["status", "start", "stop"])
def test_a_data_dir_whose_server_properties_is_not_text_is_named(tmp_path: Path, command: str) -> None:
    """Found by review: invalid UTF-8 there gave `kafka status` a 38-line traceback, and `kafka start` an
    error blamed on --port."""
    (tmp_path / "server.properties").write_bytes(b"listeners=PLAINTEXT://127.0.0.1:\xff\xfe29500\n")
    result = runner.invoke(app, ["kafka", command, "--data-dir", str(tmp_path)])
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "--data-dir" in said and "not a Kafka properties file" in said, result.output


def test_kafka_status_reads_the_port_its_data_dir_was_started_on(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text("listeners=PLAINTEXT://127.0.0.1:29500,CONTROLLER://127.0.0.1:29501\n")
    result = runner.invoke(app, ["kafka", "status", "--data-dir", str(tmp_path), "--json"], env={"SEMSCHED_KAFKA_PORT": ""})
    assert result.exit_code == 1 and json.loads(result.output)["port"] == 29500, result.output


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """tritonserver failed to bind, and PyTriton waited ~2 minutes before a traceback."""
    import socket

    (tmp_path / "config.json").write_text("{}")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["serve", "--model", str(tmp_path), "--grpc-port", str(port)])
    assert result.exit_code == 2
    assert f"port in use: --grpc-port {port}" in result.output


def test_serve_on_an_address_this_machine_lacks_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    result = runner.invoke(app, ["serve", "--model", str(tmp_path), "--host", "192.0.2.1"])  # TEST-NET-1
    assert result.exit_code == 2
    assert "--host 192.0.2.1: not an address this machine can listen on" in result.output


@pytest.mark.parametrize("command", [["train", "--no-promote"], ["train-duration", "--trace", "openb"], ["train-dag"]])
def test_a_train_command_never_overwrites_a_version(tmp_path: Path, command: list[str]) -> None:
    """Each wrote over an existing version (the serving one too), into latest's target with
    --version latest (then latest -> latest), or outside the model root with ../name."""
    kept = tmp_path / "models" / "v1"
    kept.mkdir(parents=True)
    (kept / "config.json").write_text('{"version": "v1"}')
    (tmp_path / "models" / "latest").symlink_to("v1")
    for name, says in (("v1", "already exists"), ("latest", "not a version name"), ("../esc", "not a version name")):
        result = runner.invoke(app, [*command, "--out", str(tmp_path / "models"), "--version", name])
        assert result.exit_code == 2, result.output
        assert says in " ".join(result.output.replace("│", " ").split()), result.output
    assert (kept / "config.json").read_text() == '{"version": "v1"}' and not (tmp_path / "esc").exists()
    assert (tmp_path / "models" / "latest").resolve() == kept.resolve()


def test_every_command_lists_its_summary_as_one_line() -> None:
    """The command lists (``semsched --help``, ``semsched bench --help``) show each command's first
    help paragraph as one line, re-wrapped to the terminal; Typer's rich mode kept the docstrings'
    line breaks there (ragged lines)."""
    def commands(group: typer.Typer) -> list[Any]:
        found = list(group.registered_commands)
        for sub in group.registered_groups:
            found += commands(sub.typer_instance) if sub.typer_instance is not None else []
        return found

    listed = commands(app)
    assert len(listed) >= 30
    assert all(c.short_help and "\n" not in c.short_help for c in listed), [c.name for c in listed if not c.short_help]
