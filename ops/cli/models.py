"""``semsched models list|promote``: the model registry (``model_versions``) and promotion.

``promote DIR`` evaluates DIR and the serving version (``<models>/latest``) on the held-out
fill replay (openb, promotion seeds 100–104; :mod:`inference.training.heldout`), records
both in the archive's ``model_versions`` table and repoints ``latest`` only if DIR is
strictly better AND its p99 model-step latency (256 pending openb pods on the 1,213 openb
nodes loaded to 70 %, whatever ``--node-sample`` / ``--pod-sample`` say) is within
``--latency-budget-ms`` (:mod:`inference.training.promotion`, :mod:`inference.training.gate`).
The registry is the archive's table through :class:`ops.model_registry.ArchiveRegistry`.

The archive: ``--archive DSN`` (``chdb:///path`` or ``http(s)://…``), default
``Settings().clickhouse_dsn``. Reading (``list``) goes through a running worker's ``/sql``
when one answers (in embedded mode it owns the chdb directory); ``promote`` writes, so in
embedded mode the worker must be stopped first (or use a ClickHouse server).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ops.cli.options import non_negative
from ops.console import wide_console

console = wide_console()
models_app = typer.Typer(help="Model versions: the registry and promotion.", no_args_is_help=True)


def check_writable(archive: str | None) -> None:
    """Fail now (not after a long training run) when the registry cannot be written: in embedded
    mode a running worker owns the chdb directory."""
    from ops.cli.db import WorkerBusy, running_worker, worker_port
    from streams.settings import Settings

    settings = Settings()
    dsn = archive or settings.clickhouse_dsn
    if archive is not None:  # (found by review: a given --archive was not looked at, and a wrong password, a
        _check_given(dsn)  # server out of reach or a worker's directory failed only after the training)
        return
    if dsn.startswith("chdb://"):
        with contextlib.suppress(WorkerBusy):  # busy is running: it owns the directory all the same
            if running_worker(settings) is None:
                return
        raise typer.BadParameter(
            f"a worker on port {worker_port(settings)} owns the embedded archive ({dsn}), where model versions are "
            "recorded: stop it first, point SEMSCHED_CLICKHOUSE_URL / --archive at a ClickHouse server, or --no-promote")


def _check_given(dsn: str) -> None:
    """An ``--archive`` the registry will be written to: an embedded one no other process holds, a server that
    answers (opened and migrated now: the reason in one line and exit 1 when it does not)."""
    from ops.cli.db import open_archive
    from storage.client import held_by_another_process, open_here, redacted

    if dsn.startswith("chdb://"):
        if not open_here(dsn) and held_by_another_process(dsn):
            raise typer.BadParameter(f"another process (a worker?) holds the embedded archive {redacted(dsn)}, where "
                                     "model versions are recorded: stop it first, or --no-promote")  # fmt: skip
        return
    open_archive(dsn, create=True).close()


def archive_client(archive: str | None, *, write: bool) -> Any:
    """The archive to use: the running worker's read-only ``/sql`` for reads when it answers
    (and no ``--archive`` was given), else a direct client on the DSN (migrated)."""
    from ops.cli.db import WorkerBusy, open_archive, running_worker, worker_port
    from streams.settings import Settings

    settings = Settings()
    dsn = archive or settings.clickhouse_dsn
    if archive is None:
        try:
            worker = running_worker(settings)
        except WorkerBusy as e:
            raise typer.BadParameter(f"{e}: try again, or point SEMSCHED_CLICKHOUSE_URL / --archive elsewhere") from None
        if worker is not None and not write:
            from storage.migrate import missing

            try:
                old = missing(worker)
            except Exception:  # noqa: BLE001 - no answer (busy, say): the read itself says what is wrong
                old = []
            if old:  # a worker of an older version: what this one reads may not be there
                raise typer.BadParameter(
                    f"the worker on port {worker_port(settings)} has not applied this version's migrations "
                    f"{', '.join(f'{v:04d}' for v in old)}: it runs an older semsched. Restart it with this version "
                    "(it migrates at start), then try again")  # fmt: skip
            return worker
        if worker is not None and dsn.startswith("chdb://"):
            raise typer.BadParameter(
                f"a worker on port {worker_port(settings)} owns the embedded archive ({dsn}) and serves it "
                "read-only: stop it first, or point SEMSCHED_CLICKHOUSE_URL / --archive at a ClickHouse server")
    return open_archive(dsn, create=write)


def archive_name(client: Any) -> str:
    """What a record may say about the archive ``client`` reads: its DSN without the password (found
    by review: ``train.json`` and ``model_versions`` held it in clear), and through which worker."""
    from storage.client import redacted

    if getattr(client, "kind", "") == "worker":  # (its /sql URL names no archive)
        return f"{redacted(client.settings.clickhouse_dsn)} (through the worker at {client.dsn})"
    return redacted(str(getattr(client, "dsn", "")))


def _sample(items: list, n: int | None) -> list:
    import numpy as np

    if n is None or n >= len(items):
        return items
    keep = np.sort(np.random.default_rng(1_000_000 + n).choice(len(items), n, replace=False))
    return [items[i] for i in keep]


def openb_held_out_inputs(pods: Path | None, nodes: Path | None, pod_sample: int | None = None,
                          node_sample: int | None = None) -> tuple[list, list]:  # fmt: skip
    """The fill benchmark's openb nodes and pods; ``*_sample`` keep seeded subsets (a fill
    sequence fills a share of the GPU capacity: fewer nodes make it shorter)."""
    from ops.cli.train import fill_inputs_or_exit

    node_views, pod_list = fill_inputs_or_exit(pods, nodes)
    return _sample(node_views, node_sample), _sample(pod_list, pod_sample)


def openb_sim_slice(jobs: int, node_sample: int | None = None, load: str = "high") -> tuple[list, list, Any]:
    """The openb trace's LAST ``jobs`` jobs with a run time (the latest slice in time), at load
    ``load`` (a level of ``semsched bench trace``), for the simulator part of the replay."""
    from ops.bench.simulation import load_trace_workload, parse_load
    from scheduling.simulator import SimConfig

    workload = load_trace_workload("openb", None, None, node_sample, 0)
    workload.jobs = workload.jobs[-jobs:]
    _, plan = parse_load(load, workload)
    return workload.nodes, workload.scaled(plan.factor, plan.copies), SimConfig(step_s=1.0, load_factor=plan.factor)


def run_promote(candidate: Path, models: Path, *, seeds: list[int], pod_sample: int | None = None,
                node_sample: int | None = None, pods: Path | None = None, nodes: Path | None = None,
                archive: str | None = None, reuse: bool = True, sim_jobs: int = 0, sim_load: str = "extreme",
                latency_budget_ms: float | None = 100.0) -> Any:  # fmt: skip
    """Promote ``candidate`` into ``models`` (prints the comparison); returns the PromotionResult.
    ``latency_budget_ms``: the candidate's p99 model step must be within it (None: no budget)."""
    from inference.training.heldout import HeldOutReplay
    from inference.training.promotion import check_candidate, check_name, promote
    from ops.cli.train import fill_inputs_or_exit
    from ops.model_registry import ArchiveRegistry

    if not (candidate / "config.json").exists():
        raise typer.BadParameter(f"{candidate} is not a model directory (no config.json)")
    extra: dict[str, Any] = {"sim_jobs": sim_jobs, "sim_load": sim_load} if sim_jobs else {}
    try:
        replay = HeldOutReplay(seeds=tuple(seeds), pod_sample=pod_sample, node_sample=node_sample,
                               pods_path=str(pods) if pods else None, nodes_path=str(nodes) if nodes else None,
                               extra=extra | {"latency_inputs": "openb, every node and pod"})  # fmt: skip
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:  # before the held-out inputs are loaded: the serving version itself, a taken name, a broken config
        check_candidate(candidate, models, seeds)
    except (ValueError, FileExistsError) as e:
        raise typer.BadParameter(str(e)) from None
    registry = ArchiveRegistry(archive_client(archive, write=True))
    try:
        check_name(candidate, registry)
    except FileExistsError as e:
        raise typer.BadParameter(str(e)) from None
    every_node, every_pod = fill_inputs_or_exit(pods, nodes)
    node_views, pod_list = _sample(every_node, node_sample), _sample(every_pod, pod_sample)
    sim = openb_sim_slice(sim_jobs, node_sample, sim_load) if sim_jobs else None
    console.print(f"held-out replay: openb fill, {len(node_views):,} nodes, {len(pod_list):,} pods, seeds {seeds}"
                  + (f"; simulator: the trace's last {sim_jobs} jobs at load {sim_load}" if sim else "")
                  + f"; model step timed at {replay.latency_pending} pending pods on {len(every_node):,} nodes "
                  f"({replay.latency_load:.0%} of the GPUs allocated), budget "
                  + ("none" if latency_budget_ms is None else f"{latency_budget_ms:g} ms"))  # fmt: skip
    with console.status("evaluating the candidate and the serving version on the held-out replay"):
        result = promote(candidate, models, registry, node_views, pod_list, replay, sim=sim,
                         reuse_serving_evaluation=reuse, latency_budget_ms=latency_budget_ms,
                         latency_inputs=(every_node, every_pod))  # fmt: skip
    table = Table("seed", f"{result.version} (candidate)", f"{result.serving_version or '-'} (serving)",
                  title="GPU allocated at 100 % arrived demand (%)")  # fmt: skip
    serving = {s["seed"]: s for s in (result.serving or {}).get("per_seed", [])}
    for s in result.candidate.get("per_seed", []):
        other = serving.get(s["seed"])
        table.add_row(str(s["seed"]), f"{s['allocated_pct_at_100']:.3f}",
                      "-" if other is None else f"{other['allocated_pct_at_100']:.3f}")  # fmt: skip
    table.add_row("mean", _pct(result.candidate.get("score")), _pct((result.serving or {}).get("score")))
    console.print(table)
    console.print(_latency_table(result))
    if sim:
        rows = {"candidate": result.candidate.get("simulator") or {}, "serving": (result.serving or {}).get("simulator")}
        t = Table("model", "JCT mean (s)", "JCT p95", "queueing mean (s)", "queueing p95",
                  title="simulator slice (secondary, not the criterion)")  # fmt: skip
        for name, m in rows.items():
            if m:
                t.add_row(name, *(_pct(m.get(k)) for k in ("jct_mean", "jct_p95", "queue_mean", "queue_p95")))
        console.print(t)
    colour = "green" if result.promoted else "yellow"
    console.print(f"[{colour}]{result.status}[/{colour}]: {result.reason}; {models / 'latest'} → {result.latest}")
    return result


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _latency_table(result: Any) -> Table:
    """The model step's p50 / p99 of both versions (the serving one's may be a recorded measurement)."""
    t = Table("model", "p50 ms", "p99 ms", "inputs p50", "model p50", "pending", "nodes", "note",
              title="model step latency (inputs + one model call)")  # fmt: skip
    for name, ev in ((f"{result.version} (candidate)", result.candidate),
                     (f"{result.serving_version} (serving)", result.serving)):  # fmt: skip
        lat = (ev or {}).get("latency")
        if ev is None or not lat:
            continue
        note = lat.get("error") or ("recorded earlier" if ev.get("reused_from_registry") else "")
        t.add_row(name, _ms(lat.get("p50_ms")), _ms(lat.get("p99_ms")), _ms(lat.get("inputs_p50_ms")),
                  _ms(lat.get("model_p50_ms")), str(lat.get("pending", "-")), f"{lat.get('nodes', 0):,}", note)  # fmt: skip
    return t


@models_app.command("promote")
def promote_command(
    candidate: Path = typer.Argument(..., help="The model directory to promote (e.g. models/<version>)."),
    models: Path = typer.Option(Path("models"), help="Model root: <models>/latest is the serving version."),
    seeds: str = typer.Option("100-104", help="Held-out fill seeds (never 0-9 or 42-51)."),
    pod_sample: int = typer.Option(None, min=1, help="Evaluate on a seeded sample of this many openb pods."),
    node_sample: int = typer.Option(None, min=1, help="Evaluate on a seeded sample of this many openb nodes (faster)."),
    pods: Path = typer.Option(None, help="openb pod list (default: the shared data)."),
    nodes: Path = typer.Option(None, help="openb node list (default: the shared data)."),
    archive: str = typer.Option(None, help="Archive DSN (default SEMSCHED_CLICKHOUSE_URL or the embedded chdb)."),
    reuse: bool = typer.Option(True, help="Reuse the serving version's recorded evaluation on the same replay."),
    sim_jobs: int = typer.Option(0, min=0, help="Also replay the openb trace's last N jobs in the simulator (JCT, "
                                         "queueing; recorded, not the criterion; slow for the learned policy)."),
    sim_load: str = typer.Option("extreme", help="Load of the simulator slice (low, medium, high, extreme, native)."),
    latency_budget_ms: float = typer.Option(100.0, callback=non_negative, help="Refuse a candidate whose p99 model step (256 pending "
                                                        "openb pods, 1,213 nodes at 70 %) takes longer (ms)."),
) -> None:
    """Promote CANDIDATE if it beats the serving version on the held-out replay and its model step is
    within the latency budget; record both. Exits 1 when the evaluation refuses it (the reason is printed),
    so a script can tell; 2, before anything is evaluated, when it cannot be judged here (not a model
    directory, trained or validated on the replay's seeds, already serving, a version name taken)."""
    from ops.bench.simulation import load_factor
    from ops.cli.options import seed_list

    try:  # before anything loads
        load_factor(sim_load)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--sim-load") from None
    result = run_promote(candidate, models, seeds=seed_list(seeds), pod_sample=pod_sample, node_sample=node_sample,
                         pods=pods, nodes=nodes, archive=archive, reuse=reuse, sim_jobs=sim_jobs, sim_load=sim_load,
                         latency_budget_ms=latency_budget_ms)  # fmt: skip
    if not result.promoted:
        raise typer.Exit(1)


@models_app.command("list")
def list_command(
    models: Path = typer.Option(Path("models"), help="Model root (marks the serving version)."),
    archive: str = typer.Option(None, help="Archive DSN (default SEMSCHED_CLICKHOUSE_URL or the embedded chdb)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Every recorded model version: source, status, held-out scores, the reason; `*` = serving now
    (--json adds the creation time, config, training metrics and both evaluations)."""
    from inference.training.promotion import serving_dir
    from ops.model_registry import ArchiveRegistry

    rows = ArchiveRegistry(archive_client(archive, write=False)).list()
    serving = serving_dir(models)
    recorded = {r.version for r in rows}
    unrecorded = sorted(p.name for p in models.glob("*") if (p / "config.json").exists() and not p.is_symlink()
                        and not p.name.startswith(".")  # (a killed save's staging directory: not a version, review)
                        and p.name not in recorded) if models.is_dir() else []  # fmt: skip
    if as_json:
        typer.echo(json.dumps({"versions": [r.to_json() for r in rows], "serving": serving.name if serving else None,
                               "unrecorded": unrecorded}, default=str))  # fmt: skip
        return
    t = Table("", "version", "source", "status", "held-out %", "serving %", "p99 step ms", "vs", "reason",
              title="model_versions")  # fmt: skip
    t.columns[1].no_wrap = True
    for r in rows:
        t.add_row("*" if serving is not None and serving.name == r.version else "", r.version, r.source, r.status,
                  _pct(r.candidate_score), _pct(r.serving_score), _ms((r.step_latency or {}).get("p99_ms")),
                  r.parent_version or "-", r.reason)  # fmt: skip
    console.print(t)
    if unrecorded:
        console.print(f"[dim]in {models} but never recorded: {', '.join(unrecorded)}[/dim]")
