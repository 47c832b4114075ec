"""``semsched bench pipeline``: the whole control plane on one machine, as fast as it goes.

On a fresh state directory ``<state>/bench-pipeline`` (wiped at the start) it starts a
local Kafka broker, creates the topics, starts the worker (ingest, tables, scheduling
loop, archiver → embedded chdb) and the simulated agents (``--speed 1e9
--default-duration 0``: every job finishes as soon as it starts) as subprocesses,
publishes the 1,213 openb GPU nodes as inventory and waits until the worker holds them,
then pushes ``jobs`` openb pods (cycled through the trace, each with a unique job id) on
``jobs.submitted`` as fast as one :class:`~streams.producer.EventProducer` can.

Measured, all from the archive (the worker's ``POST /sql``):

- **sustained events/s** — the events of this run that landed in the archive (job
  submissions, decisions, commands, lifecycle events, agent telemetry; not the inventory,
  which is published before the clock starts) up to the moment the archive first held,
  for every job, its submission, its decision, its command and a terminal lifecycle row
  (``finished``, or ``rejected``), divided by the wall time from the first submission to
  that moment (taken from ``archived_at``). Also jobs/s end to end = jobs / that time.
- **submission → command latency** — per job, the ``event_time`` of its first
  ``PlacementCommand`` minus the ``event_time`` of its ``JobSubmitted`` (stamped when it
  was published). It includes the wait for the next scheduling tick (``--step``).
- **decision latency** — ``decisions.latency_ms`` of the placements (the worker's own
  submit → command measure) and **step compute** — ``step_compute_ms`` per scheduling
  step (one value per step that placed something).

Everything started is stopped by PID at the end, also on failure.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops.bench import environment, fmt, percentiles, write_json
from ops.console import wide_console
from ops.local_stack import LocalStack, StackBusy
from ops.processes import Child, wait_for
from storage.queries import bench_pipeline as q
from streams.settings import Settings

console = wide_console()

AGENT_ARGS = ["--speed", "1e9", "--default-duration", "0", "--telemetry", "2"]


# --------------------------------------------------------------------------- worker HTTP


def sql(settings: Settings, query: str, *, flush: bool = False, timeout: float = 120.0) -> list[list[Any]]:
    return LocalStack(settings, settings.state_dir).sql(query, flush=flush, timeout=timeout)


def _epoch(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC).timestamp()


# --------------------------------------------------------------------------- the run


def run_pipeline_bench(*, jobs: int, port: int, policy: str, step: float | None = None, rate: float = 0.0, timeout_s: float = 900.0,
                       out: Path | None = Path("reports/bench-pipeline.json"),
                       state_root: Path | None = None) -> int:  # fmt: skip
    from ops.local_stack import worker_status
    from ops.traces.registry import get_loader
    from scheduling.policies import available_policies
    from scheduling.policies.registry import is_policy_name

    if jobs < 1:
        console.print("[red]--jobs must be >= 1")
        return 2
    if not is_policy_name(policy):
        console.print(f"[red]unknown policy {policy!r}; available: {', '.join(available_policies())}")
        return 2
    try:
        stack = LocalStack.fresh("bench-pipeline", port=port, state_root=state_root, policy=policy,
                                 clickhouse_url="", **({"step_s": step} if step is not None else {}))  # fmt: skip
    except StackBusy as e:
        console.print(f"[red]bench pipeline cannot start:[/] {escape(str(e))}")
        return 2
    settings, run_dir = stack.settings, stack.run_dir
    console.rule("[bold]semsched bench pipeline")
    console.print(
        f"state: {run_dir}   policy: {policy}   jobs: {jobs:,} openb pods   step: {settings.step_s:g}s"
    )
    try:
        with console.status("starting the Kafka broker (first run resolves its jars with mvn)…"):
            took = stack.start_broker()
        console.print(f"[green]✓[/] Kafka broker on {settings.bootstrap} ({took:.1f}s)")
        with console.status("starting the worker…"):
            worker = stack.start_worker()
        console.print(f"[green]✓[/] worker (pid {worker.pid}, web :{settings.web_port})")
        agents = stack.start_agents(*AGENT_ARGS)
        console.print(f"[green]✓[/] simulated agents (pid {agents.pid}, {' '.join(AGENT_ARGS)})")

        with console.status("loading the openb trace…"):
            loader = get_loader("openb")
            nodes = list(loader.nodes())
            trace = loader.load_jobs()
        asyncio.run(_publish_nodes(settings, nodes))
        _wait_nodes(settings, worker, len(nodes))
        console.print(f"[green]✓[/] {len(nodes):,} openb nodes in the worker's table")

        events = unique_submissions(trace, jobs)
        cpu_before = worker.cpu_seconds()
        push = asyncio.run(_push_jobs(settings, events, rate))
        console.print(f"[green]✓[/] pushed {jobs:,} submissions in {push['push_s']:.2f}s "
                      f"({jobs / push['push_s']:,.0f}/s producer-side)")  # fmt: skip
        t_end = _wait_archived(settings, worker, agents, jobs, push["t_first"], timeout_s)
        cpu_after = worker.cpu_seconds()
        with console.status("reading the results from the archive…"):
            result = _measure(settings, jobs=jobs, t_first=push["t_first"], t_end=t_end)
        st = worker_status(settings) or {}
        result.update({
            "bench": "pipeline", "rate": rate, "policy": policy, "step_s": settings.step_s, "jobs": jobs, "nodes": len(nodes),
            "trace": "openb", "agents": " ".join(AGENT_ARGS), "partitions": settings.partitions,
            "archive_batch_rows": settings.archive_batch_rows, "archive_flush_s": settings.archive_flush_s,
            "producer_push_s": push["push_s"], "producer_jobs_per_s": jobs / push["push_s"],
            "worker_cpu_s": _cpu_used(cpu_before, cpu_after),
            "worker_counters": st.get("counters"), "worker_steps": st.get("steps"), "worker_loop": st.get("loop"),
            "kafka": settings.bootstrap, "environment": environment(),
        })  # fmt: skip
        stack.stop()
        _print(result)
        if out is not None:
            console.print(f"wrote {write_json(out, result)}")
        return 0 if result["terminal_jobs"] == jobs else 1
    except Exception as e:  # noqa: BLE001 - report, show the logs, stop everything
        console.print(f"[red]bench failed:[/] {escape(str(e))}")
        console.print(f"[dim]{stack.log_tails()}[/]")
        return 2
    finally:
        stack.stop()


def _cpu_used(before: tuple[float, float] | None, after: tuple[float, float] | None) -> dict[str, float] | None:
    """The worker's CPU seconds from the first submission to all archived: the process (every
    thread: chdb's, the archiver's writes) and its event-loop thread, which bounds its throughput."""
    if before is None or after is None:
        return None
    return {"process": after[0] - before[0], "event_loop": after[1] - before[1]}


async def _publish_nodes(settings: Settings, nodes: list[Any]) -> None:
    from streams.producer import EventProducer

    async with EventProducer(settings) as p:
        now = datetime.now(UTC)
        for n in nodes:
            await p.send("nodes.telemetry", n.model_copy(update={"event_time": now}))
        await p.flush()


def _wait_nodes(settings: Settings, worker: Child, expected: int, timeout_s: float = 120.0) -> None:
    from ops.local_stack import worker_status

    def ready() -> bool:
        if not worker.alive():
            raise RuntimeError(f"the worker died:\n{worker.log_tail()}")
        st = worker_status(settings)
        return st is not None and st["nodes"] >= expected

    with console.status(f"waiting for the worker to ingest {expected:,} nodes…"):
        wait_for(ready, timeout_s, what="the node inventory")


def unique_submissions(trace: list[Any], n: int) -> list[Any]:
    """``n`` submissions cycled from the trace, each with a unique job id and event id."""
    from scheduling.events import new_event_id

    out = []
    for i in range(n):
        ev = trace[i % len(trace)].event
        out.append(ev.model_copy(update={"job_id": f"b{i:07d}-{ev.job_id}", "event_id": new_event_id()}))
    return out


async def _push_jobs(settings: Settings, events: list[Any], rate: float = 0.0) -> dict[str, float]:
    """Publish as fast as possible (``rate`` 0) or at ``rate`` jobs/s; each event is stamped
    with the moment it is sent."""
    from streams.producer import EventProducer

    with Progress(TextColumn("[bold]push"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:  # fmt: skip
        task = bar.add_task("push", total=len(events))
        async with EventProducer(settings) as p:
            t_first = time.time()
            for i, ev in enumerate(events):
                if rate > 0 and (ahead := t_first + i / rate - time.time()) > 0:
                    await asyncio.sleep(ahead)
                await p.send("jobs.submitted", ev.model_copy(update={"event_time": datetime.now(UTC)}))
                if i % 500 == 499:
                    bar.update(task, completed=i + 1)
            await p.flush()
            bar.update(task, completed=len(events))
            return {"t_first": t_first, "push_s": time.time() - t_first}


def _wait_archived(settings: Settings, worker: Child, agents: Child, jobs: int, t_first: float,
                   timeout_s: float) -> float:  # fmt: skip
    """Poll until the archive holds every job's submission, decision, command and terminal
    lifecycle row (:data:`storage.queries.bench_pipeline.COMPLETE`); returns the epoch second at which that first
    became true (from ``archived_at``). The archive is probed every 2 s (and every 0.5 s
    once the worker says every job settled); the probe is one small query."""
    from ops.local_stack import worker_status

    deadline = time.time() + timeout_s
    last: dict[str, Any] = {}
    in_archive = polls = 0
    with Progress(TextColumn("[bold]jobs"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                  TimeElapsedColumn(), console=console) as bar:  # fmt: skip
        task = bar.add_task("jobs", total=jobs, detail="")
        while time.time() < deadline:
            for c in (worker, agents):
                if not c.alive():
                    raise RuntimeError(f"the {c.name} died:\n{c.log_tail()}")
            st = worker_status(settings, timeout=10)
            if st is not None:
                last = st
                settled = st["finished"] + st["rejected"]
                bar.update(task, completed=settled, detail=(
                    f"pending {st['pending']} reserved {st['reserved']} running {st['running']} "
                    f"| archive {in_archive:,} | archiver lag {sum((st.get('archiver') or {}).get('lag', {}).values()):,}"
                ))  # fmt: skip
                polls += 1
                if settled >= jobs or polls % 4 == 0:  # the worker may lag the archive (see the report)
                    rows = sql(settings, q.COMPLETE)
                    in_archive = int(rows[0][0])
                    if in_archive >= jobs:
                        return _epoch(rows[0][1])
            time.sleep(0.5)
    raise TimeoutError(f"the archive did not hold every job within {timeout_s:.0f}s; worker status: {last}")


def _measure(settings: Settings, *, jobs: int, t_first: float, t_end: float) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for table, where in (("jobs_submitted", ""), ("decisions", ""), ("actions", ""), ("jobs_lifecycle", ""),
                         ("nodes_telemetry", "source = 'agent'")):  # fmt: skip
        rows = sql(settings, q.rows_in_window(table, t_first - 0.001, t_end, where), flush=not counts)
        counts[table] = int(rows[0][0])
    wall = t_end - t_first
    total = sum(counts.values())
    sub_cmd = sql(settings, q.SUBMIT_TO_COMMAND_MS)
    decided = sql(settings, q.FIRST_ATTEMPT_LATENCY_MS)
    steps = sql(settings, q.STEP_COMPUTE_MS)
    states = sql(settings, q.LIFECYCLE_STATES)
    outcomes = sql(settings, q.DECISION_OUTCOMES)
    retried = sql(settings, q.RETRIED)
    multi = sql(settings, q.FINISHED_MORE_THAN_ONCE)
    terminal = sql(settings, q.TERMINAL_JOBS)
    return {
        "wall_s": wall,
        "events": total,
        "events_by_table": counts,
        "events_per_s": total / wall,
        "jobs_per_s": jobs / wall,
        "terminal_jobs": int(terminal[0][0]),
        "submit_to_command_ms": percentiles([float(r[0]) for r in sub_cmd]),
        "decision_latency_ms": percentiles([float(r[0]) for r in decided]),
        "step_compute_ms": percentiles([float(r[0]) for r in steps]),
        "placements_per_step": percentiles([float(r[1]) for r in steps]),
        "retry_decisions": int(retried[0][0]),
        "jobs_finished_more_than_once": int(multi[0][0]),
        "lifecycle_states": {r[0]: int(r[1]) for r in states},
        "decision_outcomes": {r[0]: int(r[1]) for r in outcomes},
        "t_first_submit": datetime.fromtimestamp(t_first, UTC).isoformat(),
        "t_all_archived": datetime.fromtimestamp(t_end, UTC).isoformat(),
    }


def _print(r: dict[str, Any]) -> None:
    t = Table(
        title=f"pipeline: {r['jobs']:,} openb pods, {r['nodes']:,} nodes, {r['policy']}, step {r['step_s']:g}s"
    )
    t.add_column("metric", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    t.add_column("n / note", style="dim")
    t.add_row("wall: first submit → all archived", f"{r['wall_s']:.2f} s", "")
    t.add_row("events archived in that time", fmt(r["events"]), "excl. inventory")
    t.add_row("[bold]sustained events/s", f"[bold]{r['events_per_s']:,.0f}", "")
    t.add_row("[bold]jobs/s end to end", f"[bold]{r['jobs_per_s']:,.1f}", "")
    t.add_row("producer push jobs/s", f"{r['producer_jobs_per_s']:,.0f}", "")
    for key, label in (("submit_to_command_ms", "submit → command"), ("decision_latency_ms", "decision latency"),
                       ("step_compute_ms", "step compute")):  # fmt: skip
        p = r[key]
        t.add_row(f"[bold]{label}[/] p50 / p99 ms", f"{fmt(p['p50'])} / {fmt(p['p99'])}", f"n={p['n']:,}")
    if cpu := r.get("worker_cpu_s"):
        per_k = 1000.0 / r["jobs"]
        t.add_row("[bold]worker CPU per 1,000 jobs[/] process / event loop",
                  f"{cpu['process'] * per_k:.2f} / {cpu['event_loop'] * per_k:.2f} s",
                  f"{cpu['process']:.1f} / {cpu['event_loop']:.1f} s in all")  # fmt: skip
    pps = r["placements_per_step"]
    t.add_row("placements per step p50 / max", f"{fmt(pps['p50'], 0)} / {fmt(pps['max'], 0)}", "")
    t.add_row("terminal jobs in archive", f"{r['terminal_jobs']:,} / {r['jobs']:,}", "")
    loop = r.get("worker_loop") or {}
    if loop:  # where the worker's scheduling loop spent its time (the whole run)
        t.add_row("worker steps, s in them", f"{r.get('worker_steps') or 0:,}, {loop.get('tick_s', 0):.1f} s", "")
        t.add_row("of which compute / publish", f"{loop.get('compute_s', 0):.1f} / {loop.get('publish_s', 0):.1f} s", "")
    console.print(t)
    console.print("[dim]events: " + ", ".join(f"{k} {v:,}" for k, v in r["events_by_table"].items()))
    console.print(
        "[dim]lifecycle (whole run): " + ", ".join(f"{k} {v:,}" for k, v in r["lifecycle_states"].items())
    )
    console.print(
        "[dim]submit → command: JobSubmitted.event_time (stamped at publish) → first PlacementCommand.event_time. "
        "decision latency: decisions.latency_ms of first-attempt placements (the worker's own measure). "
        "step compute: StepResult.compute_ms, one value per step that placed jobs. "
        f"Latency includes waiting for the next scheduling tick (step {r['step_s']:g}s).[/]"
    )
    if r["retry_decisions"] or r["jobs_finished_more_than_once"]:
        console.print(f"[yellow]warning:[/] {r['retry_decisions']:,} retry decisions; "
                      f"{r['jobs_finished_more_than_once']:,} jobs finished more than once "
                      f"(timed_out {r['lifecycle_states'].get('timed_out', 0):,}) — see the worker's lifecycle "
                      "handling; the numbers above count first attempts only")  # fmt: skip
