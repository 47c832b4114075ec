"""``semsched bench snapshot``: what a worker's step pays to know what placed jobs hold.

Before its policy runs, each step of the worker's loop needs the cluster as its tables say:
the nodes' capacity and health minus what the ``running`` table holds. Here the table holds
``held`` openb pods (rows as the worker writes them, :class:`~streams.state.RunningJob`),
placed on random nodes of the 1,213 openb GPU nodes where they fit; each timed step first lets
``changes`` of them finish and places as many new ones (half and half), then gets that
snapshot two ways (every node has reported since the last step, so every node view is a
new object, equal to the last: the worst case for the kept path, which compares them):

- **afresh**: the whole table read back (each row parsed once and cached by its identity, as
  :meth:`~streams.table_views.TableViews.holdings` does) and reserved on a snapshot of the
  nodes, as every step did before ``streams/snapshot_cache.py``;
- **kept**: :class:`~streams.held_ledger.HeldLedger` reads the written rows only, and
  :class:`~streams.snapshot_cache.SnapshotCache` frees and reserves them on its kept snapshot.

The two answers are checked equal at every step.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.table import Table

from ops.bench import fmt, percentiles, show_and_write
from ops.console import wide_console

console = wide_console()


class _Table:
    """The worker's ``running`` table of openb pods on the nodes, and the truth it stands for."""

    def __init__(self, views: list[Any], events: list[Any], seed: int) -> None:
        from scheduling.snapshot import ClusterSnapshot

        self.views, self.events, self.rng = views, events, random.Random(seed)
        self.truth = ClusterSnapshot.from_nodes(views)  # every reservation, kept by hand
        self.rows: dict[str, dict[str, Any]] = {}
        self.serial = 0

    def read(self, name: str, key: str, model: Any) -> Any:  # Worker.read, without its parse cache
        return model.model_validate(self.rows[key])

    def place(self) -> str | None:
        """The next openb pod (a fresh job id) on a random node where it fits; its job id."""
        from scheduling.gpu_select import select_gpus
        from scheduling.job import JobRequest
        from scheduling.snapshot import CapacityError
        from streams.state import RunningJob

        k, self.serial = self.serial, self.serial + 1
        ev = self.events[k % len(self.events)].model_copy(update={"job_id": f"pod-{k}"})
        job, t = JobRequest.from_event(ev), self.truth
        for _ in range(64):
            i = self.rng.randrange(t.num_nodes)
            if (picked := select_gpus(t, i, job)) is None:
                continue
            gpus = list(picked)
            try:
                t.reserve(i, job, gpus)  # checks cpu and memory
            except CapacityError:
                continue
            else:
                self.rows[job.job_id] = RunningJob(job=ev, attempt=0, submit_ts=0.0, decision_id=f"d-{k}",
                                                   node_id=self.views[i].node_id, gpu_indices=gpus, state="running",
                                                   reserved_ts=0.0).model_dump(mode="json")  # fmt: skip
                return job.job_id
        return None

    def finish(self, job_id: str) -> None:
        from scheduling.job import JobRequest
        from streams.state import RunningJob

        r = RunningJob.model_validate(self.rows.pop(job_id))
        self.truth.free(self.truth.index_of(r.node_id), JobRequest.from_event(r.job), r.gpu_indices)


def _measure(views: list[Any], events: list[Any], held: int, changes: int, repeat: int) -> dict[str, Any] | str:
    """One size: the row of the table, or what differed."""
    from streams.held_ledger import HeldLedger
    from streams.snapshot_cache import SnapshotCache, built_afresh
    from streams.table_views import TableViews

    table, cluster = _Table(views, events, seed=held), views[0].cluster
    w = SimpleNamespace(running=table.rows, inflight={}, settings=SimpleNamespace(partitions=4), read=table.read)
    table_views = TableViews(w)  # type: ignore[arg-type]
    ledger = HeldLedger()
    cache = SnapshotCache(ledger, verify_s=float("inf"))
    misses = 0
    while len(table.rows) < held and misses < 1000:
        misses += table.place() is None
    ledger.sync(table.rows, table_views.holding)
    cache.snapshot(cluster, views, list)
    table_views.holdings({0, 1, 2, 3})  # its parse cache, as a running worker has it
    afresh_ms, kept_ms = [], []
    for _ in range(repeat):
        for job_id in table.rng.sample(sorted(table.rows), min(len(table.rows), changes // 2)):
            table.finish(job_id)
            ledger.touch(job_id)
        for _ in range(changes - changes // 2):
            if (job_id := table.place()) is not None:
                ledger.touch(job_id)
        views = [replace(v) for v in views]  # every node reported since the last step: new, equal views
        t = time.perf_counter()
        fresh = built_afresh(views, table_views.holdings({0, 1, 2, 3}), cache.tables.get(cluster), cluster)
        afresh_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        ledger.sync(table.rows, table_views.holding)
        kept = cache.snapshot(cluster, views, list)
        kept_ms.append((time.perf_counter() - t) * 1000)
        if (diff := kept.first_difference(fresh.snapshot) or kept.first_difference(table.truth)) is not None:
            return diff
    a, k = percentiles(afresh_ms), percentiles(kept_ms)
    return {"held": len(table.rows), "changes": changes, "afresh_ms": a, "kept_ms": k,
            "speed_up": a["p50"] / k["p50"] if k["p50"] else None}  # fmt: skip


def run_snapshot_bench(*, held: list[int], changes: int, repeat: int, out: Path | None) -> int:
    from ops.traces.registry import get_loader
    from scheduling.node import NodeView

    console.rule("[bold]semsched bench snapshot")
    loader = get_loader("openb")
    views = [NodeView.from_telemetry(n, with_allocation=False) for n in loader.nodes()]
    events = [tj.event for tj in loader.load_jobs()]
    rows: list[dict[str, Any]] = []
    with console.status("timing steps…") as status:
        for n in held:
            status.update(f"timing steps with {n:,} jobs held…")
            row = _measure(views, events, n, changes, repeat)
            if isinstance(row, str):
                console.print(f"[red]the kept snapshot differs from the truth: {row}")
                return 1
            rows.append(row)
    table = Table(title=f"a step's starting snapshot, openb ({len(views):,} nodes), {repeat} steps each")
    for col in ("held", "changes per step", "afresh p50 / p99 ms", "kept p50 / p99 ms", "× (p50)"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        a, k = r["afresh_ms"], r["kept_ms"]
        table.add_row(fmt(r["held"]), fmt(r["changes"]), f"{fmt(a['p50'])} / {fmt(a['p99'])}",
                      f"{fmt(k['p50'])} / {fmt(k['p99'])}", fmt(r["speed_up"], 1))  # fmt: skip
    show_and_write(console, table, "held: rows in the running table (as many as fit when fewer); afresh: "
                   "TableViews.holdings + a snapshot of the nodes + reserve_many; kept: HeldLedger.sync + "
                   "SnapshotCache.snapshot.", out, "snapshot", {"trace": "openb", "repeat": repeat, "results": rows})
    return 0
