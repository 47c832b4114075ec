"""The demo refuses, before starting anything, a replay that would outlast its timeout
(openb's first pods are days apart: at a low speed-up the demo looked hung)."""

from __future__ import annotations

from pathlib import Path

from ops.demo import replay_plan, run_demo
from ops.traces.registry import get_loader


def test_sparse_start_at_low_speed_is_refused_with_the_ways_out() -> None:
    loader = get_loader("openb", start_offset=0, limit=50)
    plan, refusal = replay_plan(loader, jobs=50, speed=2000, max_gap_s=None, timeout_s=900)
    assert refusal is not None
    assert "115.6 days" in plan and "--timeout 900" in refusal
    for way_out in ("--speed", "--max-gap", "--start-offset"):
        assert way_out in refusal


def test_max_gap_shortens_the_submissions_but_not_the_run_times() -> None:
    loader = get_loader("openb", start_offset=0, limit=50)
    plan, refusal = replay_plan(loader, jobs=50, speed=2000, max_gap_s=0.5, timeout_s=900)
    assert "submitted within 21 s" in plan  # 49 gaps, each capped at 0.5 s (one is shorter)
    assert refusal is not None  # the pods still run for days of trace time


def test_dense_window_is_accepted() -> None:
    loader = get_loader("openb", start_offset=10_000_000, limit=100)
    plan, refusal = replay_plan(loader, jobs=100, speed=2000, max_gap_s=None, timeout_s=900)
    assert refusal is None
    assert plan.startswith("100 openb pods over trace t=10,000,483")


def test_empty_window_is_refused() -> None:
    loader = get_loader("openb", start_offset=1e12, limit=10)
    _, refusal = replay_plan(loader, jobs=10, speed=2000, max_gap_s=None, timeout_s=900)
    assert refusal is not None and "lower --start-offset" in refusal


def test_refused_demo_starts_nothing(tmp_path: Path) -> None:
    rc = run_demo(
        jobs=50, speed=2000, start_offset=0, policy="best-fit", port=1, timeout_s=900, state_root=tmp_path
    )
    assert rc == 2
    assert not (tmp_path / "demo").exists()


def test_an_unknown_policy_is_refused_before_the_last_run_is_wiped(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from ops.cli.main import app

    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path))
    last_run = tmp_path / "demo" / "archive-of-the-last-run"
    last_run.mkdir(parents=True)
    result = CliRunner(env={"COLUMNS": "300"}).invoke(app, ["demo", "--policy", "nope", "--jobs", "10",
                                                            "--start-offset", "10000000"])  # fmt: skip
    assert result.exit_code == 2 and last_run.exists()
    assert "'nope'" in result.output and "best-fit" in result.output


def test_a_speed_that_is_not_a_speed_up_is_refused() -> None:
    loader = get_loader("openb", start_offset=10_000_000, limit=10)
    for speed in (0.0, -5.0, float("nan"), float("inf")):  # inf: the agents refuse it, nothing would run
        _, refusal = replay_plan(loader, jobs=10, speed=speed, max_gap_s=None, timeout_s=900)
        assert refusal is not None and "--speed must be a finite number above 0" in refusal


def test_a_bad_start_offset_or_an_unreadable_trace_says_so_without_a_traceback(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """Found by review: both raised out of ``semsched demo`` with a traceback (nothing had started yet)."""
    rc = run_demo(jobs=10, speed=2000, start_offset=float("nan"), policy="best-fit", port=1, timeout_s=900,
                  state_root=tmp_path)  # fmt: skip
    assert rc == 2 and "start_offset must be a number, not nan" in capsys.readouterr().out
    monkeypatch.setenv("SEMSCHED_DATA_DIR", str(tmp_path / "nowhere"))
    rc = run_demo(jobs=10, speed=2000, start_offset=0, policy="best-fit", port=1, timeout_s=900, state_root=tmp_path)
    out = capsys.readouterr().out
    assert rc == 1 and "openb_pod_list_default.csv: cannot open" in out and "Traceback" not in out
    assert not (tmp_path / "demo").exists()


class _FakeChild:
    pid = 4242


class _FakeStack:
    """Stands in for LocalStack: no broker, worker or agents; every job settles at once."""

    def __init__(self, run_dir: Path) -> None:
        from streams.settings import Settings

        self.run_dir, self.settings, self.children = run_dir, Settings(bootstrap="unused:1"), {}

    @classmethod
    def fresh(cls, name: str, *, state_root: Path, **_: object) -> _FakeStack:
        return cls(state_root / name)

    def start_broker(self) -> float:
        return 0.0

    def start_worker(self, **_: object) -> _FakeChild:
        return _FakeChild()

    def start_agents(self, *_: str) -> _FakeChild:
        return _FakeChild()

    def stop(self) -> None:
        return None

    def log_tails(self) -> str:
        return "--- worker log tail ---\nERROR connect failed [/127.0.0.1:19092]: Connection refused"


def test_the_demo_lists_the_traces_bad_lines_and_exits_1(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Found by review: the demo said "(5 bad lines skipped)", never which nor why, and exited 0."""
    import shutil

    import ops.demo as demo
    from ops.replay import replay
    from tests.ops.test_replay import OPENB, FakeClock, Recorder

    traces = tmp_path / "data" / "traces" / "alibaba-gpu-2023"
    traces.mkdir(parents=True)
    shutil.copy(OPENB / "openb_pod_list_broken.csv", traces / "openb_pod_list_default.csv")
    shutil.copy(OPENB / "openb_node_list_gpu_node.csv", traces)
    monkeypatch.setenv("SEMSCHED_DATA_DIR", str(tmp_path / "data"))

    async def replay_to_a_recorder(loader, settings, **kw):  # type: ignore[no-untyped-def]
        kw.pop("inventory_published")  # (it asks the worker's /status)
        return await replay(loader, settings, progress=False, create_topics=False,
                            producer_factory=Recorder(FakeClock()), **kw)  # fmt: skip

    async def nothing_left(settings: object) -> int:
        return 0

    monkeypatch.setattr(demo, "LocalStack", _FakeStack)
    monkeypatch.setattr(demo, "replay", replay_to_a_recorder)
    monkeypatch.setattr(demo, "wait_until_settled", lambda stack, n, timeout: {"finished": n, "rejected": 0})
    monkeypatch.setattr(demo, "archive_catch_up", nothing_left)
    monkeypatch.setattr(demo, "report", lambda settings, submitted, wall_s: 0)  # it reconciled
    rc = demo.run_demo(jobs=100, speed=1e9, start_offset=0, policy="best-fit", port=1, timeout_s=1e9,
                       state_root=tmp_path)  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "replayed 50 nodes and 49 jobs" in out and "5 bad trace line(s) skipped" in out
    pods = traces / "openb_pod_list_default.csv"
    assert f"{pods}:4: cpu_milli is not a number: 'abc'" in out.replace("\n", "")
    assert f"{pods}:7: expected 11 fields, got 10" in out.replace("\n", "")
    assert "the trace had 5 bad line(s)" in out


def test_a_failed_demo_prints_the_log_tails_as_they_are(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Found by review: the log tails were printed as rich markup, and a log line with "[/…]" raised a
    MarkupError out of the failure handler (a traceback instead of the failure and the logs)."""
    import ops.demo as demo

    def dies(self: _FakeStack, **_: object) -> _FakeChild:
        raise RuntimeError("the worker died")

    monkeypatch.setattr(demo, "LocalStack", _FakeStack)
    monkeypatch.setattr(_FakeStack, "start_worker", dies)
    rc = demo.run_demo(jobs=10, speed=1e9, start_offset=10_000_000, policy="best-fit", port=1, timeout_s=1e9,
                       state_root=tmp_path)  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 2 and "demo failed: the worker died" in out
    assert "ERROR connect failed [/127.0.0.1:19092]: Connection refused" in out


def test_the_report_is_not_reconciled_when_the_archive_accounts_for_fewer_jobs_than_the_replay_sent(
        tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """Found by review: reconciliation reads archived submissions only, so with two of five submissions lost
    between the topic and the archive the demo said every one of the 5 reconciled, and exited 0."""
    from datetime import UTC, datetime, timedelta

    from ops.demo import report
    from scheduling.events import (
        DeadLetter,
        DecisionRecord,
        JobLifecycle,
        JobSubmitted,
        PlacementCommand,
        decision_id_for,  # fmt: skip
    )
    from storage.client import close_client, get_client
    from storage.migrate import migrate
    from storage.writer import ArchiveWriter
    from streams.settings import Settings

    def at(s: float) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=s)

    settings = Settings(state_dir=tmp_path)
    client = get_client(settings.clickhouse_dsn)
    try:
        migrate(client)
        w = ArchiveWriter(client)
        for k, job in enumerate("ABC"):  # three jobs that ran, and one submission refused with a reason
            did = decision_id_for(job, 0, "sub")
            w.write("jobs_submitted", [JobSubmitted(event_time=at(0), job_id=job, cpu_milli=1000)], [(0, k)])
            w.write("decisions", [DecisionRecord(event_id=did, decision_id=did, event_time=at(1), job_id=job,
                                                 outcome="placed", node_id="n1", policy="best-fit", latency_ms=1.0)],
                    [(0, k)])  # fmt: skip
            w.write("actions", [PlacementCommand(event_time=at(1), decision_id=did, job_id=job, node_id="n1",
                                                 policy="best-fit")], [(0, k)])  # fmt: skip
            w.write("jobs_lifecycle", [JobLifecycle(event_time=at(2 + i), job_id=job, state=state, decision_id=did,
                                                    node_id="n1") for i, state in enumerate(("started", "finished"))],
                    [(0, 2 * k), (0, 2 * k + 1)])  # fmt: skip
        w.write("deadletter", [DeadLetter.of(b"{", "not JSON", topic="jobs.submitted", partition=0, offset=3)])
        assert report(settings, submitted=5, wall_s=1.0) == 1
        out = " ".join(capsys.readouterr().out.split())
        assert "NOT reconciled: the replay submitted 5 jobs and the archive accounts for 4" in out
        assert report(settings, submitted=4, wall_s=1.0) == 0
        assert "reconciled: every one of the 4 submitted jobs" in " ".join(capsys.readouterr().out.split())
    finally:
        close_client(settings.clickhouse_dsn)


def test_the_settle_wait_counts_jobs_done_and_forgotten_since() -> None:
    """A worker forgets done jobs SEMSCHED_DONE_RETENTION after they end (streams/done_retention.py): its
    finished count then drops, and a run longer than the retention would never have settled."""
    from ops import demo

    status = {"finished": 3, "rejected": 1, "pending": 0, "reserved": 0, "running": 0,
              "counters": {"accepted": 6, "done_forgotten": 2}}  # fmt: skip

    class Stack:
        def wait(self, settled, timeout_s, **kw):  # type: ignore[no-untyped-def]
            kw["on_status"](status)
            assert settled(status)
            assert not settled({**status, "counters": {"accepted": 6, "done_forgotten": 1}})
            return status

    assert demo.wait_until_settled(Stack(), 6, 1.0) is status  # type: ignore[arg-type]


def test_the_demo_archives_into_its_own_embedded_archive_whatever_the_shell_exports(tmp_path: Path,
                                                                                    monkeypatch) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """Found by review: with SEMSCHED_CLICKHOUSE_URL exported (the README's way to a server), the demo's
    worker archived into that server, and the reconciliation read the runs before it."""
    import ops.demo as demo
    from ops.local_stack import LocalStack

    seen: list[str] = []

    class Stack(LocalStack):
        def start_broker(self) -> float:
            seen.append(self.settings.clickhouse_url)
            raise RuntimeError("stopped before the broker")

    monkeypatch.setenv("SEMSCHED_CLICKHOUSE_URL", "http://default:@analytics.example:8123/prod")
    monkeypatch.setattr(demo, "LocalStack", Stack)
    rc = demo.run_demo(jobs=10, speed=1e9, start_offset=10_000_000, policy="best-fit", port=0, timeout_s=1e9,
                       state_root=tmp_path)  # fmt: skip
    assert rc == 2 and seen == [""]


def test_a_model_or_a_server_for_a_heuristic_policy_is_refused(tmp_path: Path) -> None:
    """Found by review: ``--model DIR`` with a heuristic policy was ignored without a word."""
    from ops.demo import learned_env

    assert learned_env("best-fit", "in-process", None) == ({}, None)
    env, problem = learned_env("best-fit", "in-process", tmp_path / "no-such-model")
    assert env == {} and problem == "--model needs the learned policy (--policy learned), not 'best-fit'"
    assert "needs the learned policy" in str(learned_env("fgd", "triton", None)[1])


def test_a_state_directory_that_cannot_be_made_says_so_without_a_traceback(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Found by review: SEMSCHED_STATE_DIR=/dev/null/state ended the demo in a NotADirectoryError traceback."""
    (tmp_path / "file").write_text("")
    rc = run_demo(jobs=10, speed=1e9, start_offset=10_000_000, policy="best-fit", port=0, timeout_s=1e9,
                  state_root=tmp_path / "file" / "state")  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 2 and "demo cannot start" in out and "Not a directory" in out, out
