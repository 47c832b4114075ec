"""The main job (`semsched demo`): the whole control plane on one machine, against the
openb trace, then a reconciled summary read back from the ClickHouse archive.

Everything it starts lives under ``<state>/demo`` (wiped at the start, so each run's
archive holds that run only) and is stopped by PID at the end, also on failure.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ops.console import wide_console
from ops.local_stack import LocalStack, StackBusy, worker_status
from ops.processes import sigterm_as_interrupt
from ops.replay import planned_due_s, replay
from ops.traces.base import TraceLineError, TraceLoader
from streams.archiver import archive_catch_up
from streams.settings import Settings

console = wide_console()


def wait_until_settled(stack: LocalStack, expected: int, timeout_s: float) -> dict[str, Any]:
    """Wait (progress bar) until every accepted job is finished or rejected."""
    with Progress(TextColumn("[bold]jobs settled"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("settle", total=expected, detail="")

        def done(st: dict[str, Any]) -> int:  # (jobs done and forgotten since, SEMSCHED_DONE_RETENTION, too)
            return st["finished"] + st["rejected"] + st["counters"].get("done_forgotten", 0)

        def show(st: dict[str, Any]) -> None:
            bar.update(task, completed=done(st),
                       detail=f"pending {st['pending']} reserved {st['reserved']} running {st['running']}")  # fmt: skip

        def settled(st: dict[str, Any]) -> bool:
            accepted = st["counters"]["accepted"]
            return accepted >= expected and done(st) >= accepted and st["pending"] + st["reserved"] + st["running"] == 0

        return stack.wait(settled, timeout_s, what="the jobs to settle", on_status=show, needs=("worker", "agents"))


async def worker_knows_nodes(stack: LocalStack, nodes: int, *, warm_up: bool = False, timeout_s: float = 60.0) -> None:
    """Wait until the worker has taken in the ``nodes`` nodes of the inventory (its ``/status``), so
    the first jobs are not decided behind the inventory's own ingestion (a real cluster's nodes
    are known long before its jobs arrive); with ``warm_up`` (a model-backed policy) also until it
    has warmed the policy up on them (``streams/policy_warm_up.py``). After ``timeout_s`` the jobs
    go anyway, with a warning."""
    t0 = time.time()

    def ready(st: dict[str, Any] | None) -> bool:
        return st is not None and st["nodes"] >= nodes and (not warm_up or st["loop"].get("warm_ups", 0) >= 2)

    while not ready(st := await asyncio.to_thread(worker_status, stack.settings)):
        if time.time() - t0 > timeout_s:
            known = "no answer" if st is None else f"{st['nodes']:,} nodes, {st['loop'].get('warm_ups', 0)} warm-ups"
            console.print(f"[yellow]the worker is not ready after {timeout_s:.0f}s ({known} of {nodes:,} nodes);[/] "
                          "replaying the jobs anyway")  # fmt: skip
            return
        await asyncio.sleep(0.1)
    what = f"the {nodes:,} nodes" + (" and warmed the policy up on them" if warm_up else "")
    console.print(f"[green]✓[/] the worker knows {what} ({time.time() - t0:.1f}s)")


def learned_env(policy: str, inference: str, model_dir: Path | None) -> tuple[dict[str, str], str | None]:
    """The worker's environment for the learned policy, or an error message (no model, a bad flag)."""
    from inference.backends import BACKENDS
    from inference.policy import default_model_dir

    if inference not in BACKENDS:
        return {}, f"--inference must be one of {', '.join(BACKENDS)}, not {inference!r}"
    from inference.policy import uses_learned

    uses_model = uses_learned(policy)
    if not uses_model:
        if inference != "in-process":
            return {}, f"--inference {inference} needs the learned policy (--policy learned)"
        # (found by review: the flag was ignored, and the demo ran the heuristic without a word)
        return {}, None if model_dir is None else f"--model needs the learned policy (--policy learned), not {policy!r}"
    model = (model_dir or default_model_dir()).absolute()
    if not (model / "config.json").exists():
        return {}, f"no model at {model}: train one first with `semsched train` (about 4–5 minutes on 2 cores)"
    return {"SEMSCHED_MODEL_DIR": str(model), "SEMSCHED_INFERENCE": inference}, None


def replay_plan(loader: TraceLoader, *, jobs: int, speed: float, max_gap_s: float | None,
                timeout_s: float) -> tuple[str, str | None]:  # fmt: skip
    """What the replay will do (one line), or why the demo refuses it: a replay whose idle
    stretches outlast ``timeout_s`` would look like a hang (openb's first pods are days apart)."""
    if not (speed > 0 and math.isfinite(speed)):  # (NaN too) the agents divide run times by it
        return "", f"--speed must be a finite number above 0 (a speed-up of arrivals and run times), not {speed:g}"
    selected = loader.load_jobs()[:jobs]
    if not selected:
        return "", f"no openb pods from t={loader.selection.start_offset or 0:.0f}s: lower --start-offset"
    due = planned_due_s(loader, speed=speed, limit=jobs, max_gap_s=max_gap_s)
    finish = max(at + (j.event.trace_duration_s or 0.0) / speed for j, at in zip(selected, due, strict=True))
    span = selected[-1].offset_s - selected[0].offset_s
    plan = (f"{len(selected)} openb pods over trace t={selected[0].offset_s:,.0f}–{selected[-1].offset_s:,.0f}s "
            f"({span / 86400:.1f} days) at {speed:g}x: submitted within {due[-1]:,.0f} s, "
            f"all run out by about {finish:,.0f} s")  # fmt: skip
    if finish > timeout_s:
        return plan, (f"{plan}, longer than --timeout {timeout_s:g} s. Raise --speed, cap idle stretches with "
                      f"--max-gap, or start where pods are dense and short (--start-offset 10000000)")  # fmt: skip
    return plan, None


def run_demo(*, jobs: int, speed: float, start_offset: float, policy: str, port: int, timeout_s: float,
             state_root: Path | None = None, inference: str = "in-process", model_dir: Path | None = None,
             max_gap_s: float | None = None) -> int:  # fmt: skip
    from ops.traces.registry import get_loader

    env, problem = learned_env(policy, inference, model_dir)
    try:  # before anything starts: a bad option, or a trace file that does not read
        loader = get_loader("openb", start_offset=start_offset, limit=jobs)
        plan, refusal = replay_plan(loader, jobs=jobs, speed=speed, max_gap_s=max_gap_s, timeout_s=timeout_s)
    except TraceLineError as e:  # FILE:LINE: reason (TraceFormatError: the file as a whole)
        console.print(f"demo: {e}", markup=False, highlight=False)
        return 1
    except ValueError as e:
        console.print(f"[red]demo:[/] {escape(str(e))}")
        return 2
    if problem or refusal:
        console.print(f"[red]demo:[/] {escape(str(problem or refusal))}")
        return 2
    with sigterm_as_interrupt():
        return _run(loader, plan, jobs=jobs, speed=speed, policy=policy, port=port, timeout_s=timeout_s,
                    state_root=state_root, env=env, max_gap_s=max_gap_s)  # fmt: skip


def _run(loader: TraceLoader, plan: str, *, jobs: int, speed: float, policy: str, port: int, timeout_s: float,
         state_root: Path | None, env: dict[str, str], max_gap_s: float | None) -> int:  # fmt: skip
    try:
        # its own embedded archive, whatever the shell exports (found by review: a SEMSCHED_CLICKHOUSE_URL left
        # set sent the demo's events into that server, and the reconciliation read its earlier runs)
        stack = LocalStack.fresh("demo", port=port, state_root=state_root, policy=policy, clickhouse_url="")
    except StackBusy as e:  # before anything of the last run is touched
        console.print(f"[red]demo cannot start:[/] {escape(str(e))}")
        return 2
    settings = stack.settings
    console.rule("[bold]semsched demo")
    console.print(f"state: {escape(str(stack.run_dir))}   policy: {policy}\nreplay: {plan}")
    t0 = time.time()
    try:
        with console.status("starting the Kafka broker (first run resolves its jars with mvn)…"):
            took = stack.start_broker()
        console.print(f"[green]✓[/] Kafka broker on {settings.bootstrap} ({took:.1f}s)")
        if env.get("SEMSCHED_INFERENCE") == "triton":
            with console.status("starting the Triton inference server…"):
                server, url, took = stack.start_triton(Path(env["SEMSCHED_MODEL_DIR"]))
            env["SEMSCHED_TRITON_URL"] = url
            console.print(f"[green]✓[/] Triton (pid {server.pid}, gRPC {url}, {took:.1f}s)")
        worker = stack.start_worker(env=env)
        model = f", model {env['SEMSCHED_MODEL_DIR']} ({env['SEMSCHED_INFERENCE']})" if env else ""
        console.print(f"[green]✓[/] worker (pid {worker.pid}, policy {policy}{model}, web :{settings.web_port})")
        agents = stack.start_agents("--speed", str(speed), "--telemetry", "5")
        console.print(f"[green]✓[/] simulated agents (pid {agents.pid})")
        stats = asyncio.run(replay(loader, settings, speed=speed, limit=jobs, strict=False, max_gap_s=max_gap_s,
                                   inventory_published=lambda n: worker_knows_nodes(stack, n, warm_up=bool(env))))  # fmt: skip
        console.print(f"[green]✓[/] replayed {stats.nodes} nodes and {stats.jobs} jobs")
        if stats.skipped_lines:  # FILE:LINE: reason, as `semsched replay` says them (the count alone said nothing)
            console.print(f"[red]✗[/] {stats.skipped_lines:,} bad trace line(s) skipped, not replayed; first:")
            for err in stats.first_errors:
                console.print(f"  {err}", markup=False, highlight=False)
        st = wait_until_settled(stack, stats.jobs, timeout_s)
        forgotten = st.get("counters", {}).get("done_forgotten", 0)
        console.print(f"[green]✓[/] settled: {st['finished']} finished, {st['rejected']} rejected"
                      + (f", {forgotten} forgotten since (SEMSCHED_DONE_RETENTION)" if forgotten else ""))
        for c in reversed(list(stack.children.values())):
            c.stop()
        with console.status("archiving what is still on the topics…"):
            archived = asyncio.run(archive_catch_up(settings))
        console.print(f"[green]✓[/] archive caught up ({archived} more rows)")
        rc = report(settings, submitted=stats.jobs, wall_s=time.time() - t0)
        if stats.skipped_lines:  # the run reconciles the jobs it was given, but the trace was not clean
            console.print(f"[red]the trace had {stats.skipped_lines:,} bad line(s)[/] (listed after the replay): "
                          "their jobs were not replayed; exit 1")  # fmt: skip
            return rc or 1
        return rc
    except KeyboardInterrupt:
        console.print("[yellow]demo interrupted:[/] stopping what it started")
        return 130
    except Exception as e:
        console.print(f"[red]demo failed:[/] {escape(str(e))}")
        console.print(f"[dim]{escape(stack.log_tails())}[/]")  # (a log line with "[/…]" was a MarkupError)
        return 2
    finally:
        stack.stop()


def report(settings: Settings, *, submitted: int, wall_s: float) -> int:
    """Print the summary and the reconciliation; the exit code says whether it reconciled."""
    from ops.summary_view import print_reconcile, print_summary
    from storage.client import get_client
    from storage.queries import reconcile, summary

    client = get_client(settings.clickhouse_dsn)
    s = summary(client, bucket_s=10.0)
    r = reconcile(client)
    print_summary(console, s, wall_s=wall_s)
    if (held := s.submitted + s.refused) < submitted:  # (found by review: "every one of the 5 submitted
        # jobs" was reconciled, exit 0, on an archive that held 3: reconciliation reads archived submissions only)
        console.print(f"[bold red]NOT reconciled:[/] the replay submitted {submitted:,} jobs and the archive accounts "
                      f"for {held:,} (accepted, or refused with a reason): {submitted - held:,} never reached it")  # fmt: skip
        print_reconcile(console, r, submitted=held)
        return 1
    ok = print_reconcile(console, r, submitted=submitted)
    return 0 if ok else 1
