"""Generate the Grafana dashboards (``dashboards/grafana/*.json``) from the panel definitions
in :mod:`storage.queries.panels` — the SQL is never edited in the JSON.

    python -m dashboards.build           # (re)write the JSON files
    python -m dashboards.build --check   # exit 1 if a checked-in file differs from what it makes

Panels are laid out in their order, left to right on Grafana's 24-column grid. Every panel
queries the provisioned ClickHouse data source (uid :data:`DATASOURCE_UID`) in raw-SQL mode,
and its description names the panel id in ``storage/queries/panels.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from storage.queries.panels import DASHBOARDS, PANELS, Panel

OUT_DIR = Path(__file__).resolve().parent / "grafana"
DATASOURCE_UID = "semsched-clickhouse"
DATASOURCE = {"type": "grafana-clickhouse-datasource", "uid": DATASOURCE_UID}
HEIGHT = 8
# the plugin's query formats (its Format enum): time series 0, table 1
_FORMAT = {"timeseries": (0, "timeSeries"), "table": (1, "table"), "stat": (1, "table")}


def _own_axis(column: str, unit: str) -> dict[str, Any]:
    """A field override: ``column`` in ``unit``, on an axis of its own on the right (a count beside the
    panel's times would read as milliseconds on theirs)."""
    return {"matcher": {"id": "byName", "options": column},
            "properties": [{"id": "unit", "value": unit}, {"id": "custom.axisPlacement", "value": "right"}]}  # fmt: skip


def _panel(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    fmt, query_type = _FORMAT[p.kind]
    defaults: dict[str, Any] = {"unit": p.unit}
    if p.unit == "percentunit":
        defaults |= {"min": 0, "max": 1}
    out: dict[str, Any] = {
        "id": pid,
        "type": p.kind,
        "title": p.title,
        "description": (p.description + " " if p.description else "") + f"SQL: storage/queries/panels.py, {p.id}",
        "datasource": DATASOURCE,
        "gridPos": {"h": HEIGHT, "w": p.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": [_own_axis(col, unit) for col, unit in p.units.items()]},
        "targets": [{
            "refId": "A", "datasource": DATASOURCE, "editorType": "sql", "format": fmt,
            "queryType": query_type, "rawSql": p.sql.strip(),
        }],
    }  # fmt: skip
    if p.kind == "timeseries":
        out["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                          "tooltip": {"mode": "multi", "sort": "none"}}  # fmt: skip
    elif p.kind == "stat":
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": True},
                          "textMode": "value_and_name"}  # fmt: skip
    return out


def dashboard(uid: str) -> dict[str, Any]:
    """The Grafana JSON model of dashboard ``uid`` (a key of ``DASHBOARDS``)."""
    panels, x, y, row_h = [], 0, 0, 0
    for p in (p for p in PANELS if p.dashboard == uid):
        if x + p.width > 24:
            x, y = 0, y + row_h
        panels.append(_panel(p, len(panels) + 1, x, y))
        x, row_h = x + p.width, HEIGHT
    return {
        "uid": uid, "title": DASHBOARDS[uid], "tags": ["semsched"], "timezone": "utc",
        "schemaVersion": 39, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
        "links": [{"type": "dashboards", "tags": ["semsched"], "asDropdown": True, "title": "semsched"}],
        "annotations": {"list": []}, "templating": {"list": []},
        "panels": panels,
    }  # fmt: skip


def render(uid: str) -> str:
    return json.dumps(dashboard(uid), indent=2, ensure_ascii=False) + "\n"


def expected_files() -> dict[Path, str]:
    return {OUT_DIR / f"{uid}.json": render(uid) for uid in DASHBOARDS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashboards.build", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    args = ap.parse_args(argv)
    files = expected_files()
    stale = sorted(set(OUT_DIR.glob("*.json")) - set(files))
    if args.check:
        bad = [p for p, text in files.items() if not p.exists() or p.read_text() != text] + stale
        for p in bad:
            print(f"out of date: {p} (run python -m dashboards.build)", file=sys.stderr)
        return 1 if bad else 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for p in stale:
        p.unlink()
    for p, text in files.items():
        p.write_text(text)
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
