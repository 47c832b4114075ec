"""The main job (`semsched demo`): the whole control plane on one machine, against the
openb trace, then a reconciled summary read back from the ClickHouse archive.

Everything it starts lives under ``<state>/demo`` (wiped at the start, so each run's
archive holds that run only) and is stopped by PID at the end, also on failure.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.processes import Child, spawn_semsched, wait_for
from streams.settings import Settings

console = Console()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_status(settings: Settings, timeout: float = 2.0) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}/status", timeout=timeout) as r:
            return json.loads(r.read())
    except OSError:
        return None


def child_env(settings: Settings) -> dict[str, str]:
    return {
        "SEMSCHED_BOOTSTRAP": settings.bootstrap,
        "SEMSCHED_STATE_DIR": str(settings.state_dir),
        "SEMSCHED_TOPIC_PREFIX": settings.topic_prefix,
        "SEMSCHED_PARTITIONS": str(settings.partitions),
        "SEMSCHED_WEB_PORT": str(settings.web_port),
        "SEMSCHED_POLICY": settings.policy,
        "SEMSCHED_STEP": str(settings.step_s),
        "SEMSCHED_CLICKHOUSE_URL": settings.clickhouse_url,
        "SEMSCHED_SESSION_TIMEOUT": str(settings.session_timeout_s),
        "SEMSCHED_CONFIRM_TIMEOUT": str(settings.confirm_timeout_s),
        "SEMSCHED_MAX_RETRIES": str(settings.max_retries),
    }


def wait_until_settled(settings: Settings, expected: int, worker: Child, timeout_s: float) -> dict[str, Any]:
    """Poll the worker until every accepted job is finished or rejected (progress bar)."""
    deadline = time.time() + timeout_s
    last: dict[str, Any] = {}
    with Progress(TextColumn("[bold]jobs settled"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("settle", total=expected, detail="")
        while time.time() < deadline:
            if not worker.alive():
                raise RuntimeError(f"the worker died:\n{worker.log_tail()}")
            st = worker_status(settings)
            if st is not None:
                last = st
                settled = st["finished"] + st["rejected"]
                bar.update(task, completed=settled,
                           detail=f"pending {st['pending']} reserved {st['reserved']} running {st['running']}")  # fmt: skip
                accepted = st["counters"]["accepted"]
                if accepted >= expected and settled >= accepted and st["pending"] + st["reserved"] + st["running"] == 0:
                    return st
            time.sleep(1.0)
    raise TimeoutError(f"jobs did not settle within {timeout_s:.0f}s; last status: {last}")


def run_demo(*, jobs: int, speed: float, start_offset: float, policy: str, port: int, timeout_s: float,
             state_root: Path | None = None) -> int:  # fmt: skip
    from ops.kafka.broker import KafkaBroker
    from ops.replay import replay
    from ops.traces.registry import get_loader
    from streams.topics import ensure_topics

    base = Settings()
    run_dir = (state_root or base.state_dir) / "demo"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    settings = base.model_copy(update={
        "bootstrap": f"127.0.0.1:{port}", "state_dir": run_dir, "topic_prefix": "semsched.",
        "web_port": free_port(), "policy": policy,
    })  # fmt: skip
    console.rule("[bold]semsched demo")
    console.print(f"state: {run_dir}   policy: {policy}   replay: {jobs} openb pods from t={start_offset:.0f}s "
                  f"at {speed:g}x")  # fmt: skip
    broker = KafkaBroker(port=port, data_dir=run_dir / "kafka")
    children: list[Child] = []
    t0 = time.time()
    try:
        with console.status("starting the Kafka broker (first run resolves its jars with mvn)…"):
            broker.start()
            asyncio.run(ensure_topics(settings))
        console.print(f"[green]✓[/] Kafka broker on {broker.bootstrap} ({time.time() - t0:.1f}s)")
        env = child_env(settings)
        worker = spawn_semsched("worker", ["worker"], env=env, run_dir=run_dir)
        children.append(worker)
        wait_for(lambda: worker_status(settings) is not None or not worker.alive(), 120, what="the worker")
        if not worker.alive():
            raise RuntimeError(f"the worker died:\n{worker.log_tail()}")
        console.print(f"[green]✓[/] worker (pid {worker.pid}, policy {policy}, web :{settings.web_port})")
        agents = spawn_semsched("agents", ["agents", "--speed", str(speed), "--telemetry", "2"], env=env,
                                run_dir=run_dir)  # fmt: skip
        children.append(agents)
        console.print(f"[green]✓[/] simulated agents (pid {agents.pid})")
        loader = get_loader("openb", start_offset=start_offset, limit=jobs)
        stats = asyncio.run(replay(loader, settings, speed=speed, limit=jobs, strict=False))
        console.print(f"[green]✓[/] replayed {stats.nodes} nodes and {stats.jobs} jobs "
                      f"({stats.skipped_lines} bad lines skipped)")  # fmt: skip
        st = wait_until_settled(settings, stats.jobs, worker, timeout_s)
        console.print(f"[green]✓[/] settled: {st['finished']} finished, {st['rejected']} rejected")
        for c in reversed(children):
            c.stop()
        with console.status("archiving what is still on the topics…"):
            archived = asyncio.run(_archive_catch_up(settings))
        console.print(f"[green]✓[/] archive caught up ({archived} more rows)")
        return report(settings, submitted=stats.jobs, wall_s=time.time() - t0)
    except Exception as e:
        console.print(f"[red]demo failed:[/] {e}")
        for c in children:
            if c.alive() or c.log_path.exists():
                console.print(f"[dim]--- {c.name} log tail ({c.log_path}) ---[/]\n{c.log_tail(15)}")
        return 2
    finally:
        for c in reversed(children):
            c.stop()
        broker.stop()


async def _archive_catch_up(settings: Settings) -> int:
    from streams.archiver import Archiver

    archiver = Archiver(settings)
    await archiver.start()
    try:
        return await archiver.run_until_caught_up()
    finally:
        await archiver.stop()


def report(settings: Settings, *, submitted: int, wall_s: float) -> int:
    """Print the summary and the reconciliation; the exit code says whether it reconciled."""
    from ops.summary_view import print_reconcile, print_summary
    from storage.client import get_client
    from storage.queries import reconcile, summary

    client = get_client(settings.clickhouse_dsn)
    s = summary(client, bucket_s=10.0)
    r = reconcile(client)
    print_summary(console, s, wall_s=wall_s)
    ok = print_reconcile(console, r, submitted=submitted)
    return 0 if ok else 1
