"""The worker's HTTP surface (Faust's web server, 127.0.0.1 only).

- ``GET  /status`` — queue sizes and counters, for the demo and operators.
- ``GET  /nodes/{node_id}/`` — a node's latest telemetry and its mean GPU / CPU utilisation
  over the current 60 s hopping window (the ``node_util`` table).
- ``POST /sql``    — run one query on the archive this worker owns. In embedded mode one
  process owns the chdb directory, so while a worker runs, ``semsched sql`` and
  ``semsched explain`` are answered here; with no worker they open the directory directly.
  The answer names the archive (``"archive"``: its DSN), so a CLI pointed at another one
  does not take it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from faust.web import Request, Response, View

from scheduling.events import partition_for
from storage.client import redacted
from storage.json_cells import wire_cell
from streams.agents import lifecycle_partitions
from streams.node_utilisation import window_means

if TYPE_CHECKING:
    from streams.app import Worker


def held_clusters(w: Worker) -> Callable[[str], bool]:
    """Whether a cluster's partition is assigned to this worker now. Its tables may also hold keys of
    partitions that moved to another worker (Faust keeps them in memory), never updated since: counted,
    two workers' counts stayed above zero after every job had finished (found by a chaos run)."""
    assigned = lifecycle_partitions(w)
    known: dict[str, bool] = {}

    def held(cluster: str) -> bool:
        if cluster not in known:
            known[cluster] = not cluster or partition_for(cluster, w.settings.partitions) in assigned
        return known[cluster]

    return held


def status(w: Worker) -> dict[str, Any]:
    """Counts of the jobs and nodes of the partitions this worker holds (:func:`held_clusters`)."""
    held = held_clusters(w)
    running = [d for d in list(w.running.values()) if d is not None and held(d["job"]["cluster"])]
    done = [d for d in list(w.done.values()) if d is not None and held(d.get("cluster", ""))]
    archiver = getattr(w, "archiver", None)
    loop = getattr(w, "loop", None)
    return {
        # the counts below are partial while the tables recover; steps run once caught up (streams/catchup.py)
        # (found by a chaos run: a restarted worker's /status showed half its tables, and said nothing of it)
        "recovering": loop.recovering() if loop is not None else None,
        "scheduling": loop.catchup.open if loop is not None else None,
        "pending": sum(1 for d in list(w.pending.values()) if d is not None and held(d["job"]["cluster"])),
        "reserved": sum(1 for d in running if d["state"] == "reserved"),
        "running": sum(1 for d in running if d["state"] == "running"),
        "finished": sum(1 for d in done if d["status"] == "finished"),
        "rejected": sum(1 for d in done if d["status"] == "rejected"),
        "nodes": sum(1 for d in list(w.nodes.values()) if d is not None and held(d.get("cluster", ""))),
        "inflight": len(w.inflight),
        "early_reports": len(w.early_reports),  # lifecycle reports waiting for their job's submission
        "steps": getattr(getattr(w, "loop", None), "steps", 0),
        "loop": dict(getattr(getattr(w, "loop", None), "stats", {})),
        "owned_partitions": sorted(getattr(getattr(w, "loop", None), "owned", ())),
        "model": model.as_dict() if (model := getattr(getattr(w, "loop", None), "model_status", None)) else None,
        "duration_model": reload.as_dict() if (reload := getattr(w, "duration_reload", None)) else None,
        "counters": dataclasses.asdict(w.counters),
        "archiver": dataclasses.asdict(archiver.stats) if archiver is not None else None,
        "log_level": logging.getLevelName(logging.root.getEffectiveLevel()),
    }


def node_window(w: Worker, node_id: str) -> dict[str, Any]:
    """Mean utilisation of the hopping window that contains now (wall clock: outside a
    stream there is no event time), from the agent reports it has seen."""
    n, gpu, cpu = window_means(w, node_id)
    return {"reports": n, "gpu_util_mean": gpu, "cpu_util_mean": cpu}


def sql_limits(query: Any) -> dict[str, Any]:
    """A ``/sql`` request's limits: ``?timeout_s=`` (seconds > 0) and ``?max_rows=`` (0: none), each the
    worker's own (:data:`storage.queries.WORKER_SQL_LIMITS`) when not given. The CLI sends its
    ``--timeout`` and ``--max-rows``; a whole read for train --from-archive or explain sends no row limit."""
    from storage.queries import WORKER_SQL_LIMITS

    limits = dict(WORKER_SQL_LIMITS)
    try:
        if (timeout := query.get("timeout_s")) is not None:
            limits["timeout_s"] = float(timeout)
            if not 0 < limits["timeout_s"] < float("inf"):
                raise ValueError
        if (rows := query.get("max_rows")) is not None:
            limits["max_rows"] = int(rows) or None
            if limits["max_rows"] is not None and limits["max_rows"] < 0:
                raise ValueError
    except ValueError:
        raise ValueError("timeout_s takes seconds > 0, max_rows a count >= 0 (0: no limit)") from None
    return limits


def register_web(w: Worker) -> None:
    app = w.app

    @app.page("/status")
    class StatusView(View):
        async def get(self, request: Request) -> Response:
            return self.json(status(w))

    @app.page("/nodes/{node_id}/")
    class NodeView(View):
        async def get(self, request: Request, node_id: str) -> Response:
            latest = w.nodes.get(node_id)
            if latest is None:
                return self.json({"error": f"unknown node {node_id!r}"}, status=404)
            if not held_clusters(w)(latest.get("cluster") or ""):  # (found by review: a moved partition's node
                # answered with the last telemetry this worker saw, frozen, where /status leaves it out)
                return self.json({"error": f"node {node_id!r} is cluster {latest.get('cluster')!r}'s, whose partition "
                                           "another worker holds now: ask that worker"}, status=404)  # fmt: skip
            return self.json({"telemetry": latest, "window": node_window(w, node_id)})

    @app.page("/sql")
    class SQLView(View):
        async def post(self, request: Request) -> Response:
            """Body: the SQL text, one read-only statement (storage/queries/read_only.py). ``?flush=1``
            first writes what the archiver has buffered. A browser's request (it carries an
            ``Origin``) is refused: a web page must not query the archive through the analyst's machine."""
            if request.headers.get("Origin"):
                return self.json({"error": "cross-origin requests are refused: /sql answers the local CLI"}, status=403)
            sql = (await request.text()).strip()
            archiver = getattr(w, "archiver", None)
            if archiver is None:
                return self.json({"error": "this worker has no archive"}, status=503)
            if not archiver.started():  # (a restarted worker, opening and migrating it: found by a chaos run)
                return self.json({"error": "this worker's archiver is starting (opening the archive): "
                                           "try again in a few seconds",
                                  "archive": redacted(w.settings.clickhouse_dsn)}, status=503)  # fmt: skip
            if request.query.get("flush"):  # bounded: an unwritable archive answers with what it holds
                await archiver.flush_all(retry_for_s=w.settings.archive_flush_s * 10)
            archive = redacted(w.settings.clickhouse_dsn)  # which one answered: a CLI pointed at another refuses it
            try:
                limits = sql_limits(request.query)
            except ValueError as e:
                return self.json({"error": str(e), "archive": archive}, status=400)

            def encode(cols: list[str], rows: list[tuple[Any, ...]]) -> bytes:  # (in the query's thread)
                return json.dumps({"columns": cols, "rows": [[wire_cell(v) for v in r] for r in rows],
                                   "archive": archive}).encode()  # fmt: skip

            try:
                body = await archiver.query(sql, encode, limits)
            except Exception as e:  # the analyst's SQL error (or a limit passed) goes back to the analyst
                return self.json({"error": str(e), "archive": archive}, status=400)
            return self.bytes(body, content_type="application/json")
