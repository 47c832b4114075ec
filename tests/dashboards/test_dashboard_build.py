"""The checked-in Grafana JSON is exactly what ``python -m dashboards.build`` makes from
storage/queries/panels.py, and every panel is on a dashboard, querying the provisioned source."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from dashboards import build
from storage.queries.panels import DASHBOARDS, PANELS, expand_macros


def test_checked_in_json_equals_the_generator() -> None:
    files = build.expected_files()
    assert set(build.OUT_DIR.glob("*.json")) == set(files), "stale or missing dashboard files"
    for path, text in files.items():
        assert path.read_text() == text, f"{path.name} is out of date: run python -m dashboards.build"
    assert build.main(["--check"]) == 0


def test_every_panel_is_on_its_dashboard_with_its_sql() -> None:
    seen = {}
    for uid in DASHBOARDS:
        d = json.loads((build.OUT_DIR / f"{uid}.json").read_text())
        assert d["uid"] == uid and d["panels"]
        for p in d["panels"]:
            (target,) = p["targets"]
            assert target["datasource"] == p["datasource"] == {"type": "grafana-clickhouse-datasource",
                                                               "uid": build.DATASOURCE_UID}  # fmt: skip
            assert target["editorType"] == "sql"
            panel_id = p["description"].rsplit(", ", 1)[1]
            seen[panel_id] = target["rawSql"]
            assert p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
    assert seen == {p.id: p.sql.strip() for p in PANELS}


def test_the_provisioned_source_has_the_panels_uid() -> None:
    text = (build.OUT_DIR.parent / "provisioning/datasources/clickhouse.yaml").read_text()
    assert f"uid: {build.DATASOURCE_UID}" in text and "type: grafana-clickhouse-datasource" in text


def test_expand_macros_like_the_plugin() -> None:
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 1, 0, 500000, tzinfo=UTC)
    f, t = int(start.timestamp()), int(end.timestamp())
    sql = "SELECT $__timeInterval(ts) AS time FROM x WHERE $__timeFilter(ts) AND y < $__toTime LIMIT $__interval_s"
    assert expand_macros(sql, start, end, 15) == (
        f"SELECT toStartOfInterval(toDateTime(ts), INTERVAL 15 second) AS time FROM x WHERE "
        f"ts >= toDateTime({f}) AND ts <= toDateTime({t}) AND y < toDateTime({t}) LIMIT 15")  # fmt: skip
    assert expand_macros("$__fromTime_ms", start, end, 0) == f"fromUnixTimestamp64Milli({f * 1000})"
    assert expand_macros("$__interval_s", start, end, 0) == "1"  # at least one second, as the plugin
    with pytest.raises(ValueError, match="unknown macro"):
        expand_macros("$__nope", start, end, 1)
    for p in PANELS:
        assert "$__" not in expand_macros(p.sql, start, end, 10), p.id


def test_a_count_beside_times_has_its_own_unit_and_axis() -> None:
    """The step-compute panel returns the number of steps beside p50 / p99 in ms: with no override it was
    drawn as milliseconds on their axis (found by review)."""
    (panel,) = [p for p in build.dashboard("semsched-decisions")["panels"]
                if p["description"].endswith("decisions.step_compute")]  # fmt: skip
    assert panel["fieldConfig"]["defaults"]["unit"] == "ms"
    assert panel["fieldConfig"]["overrides"] == [
        {"matcher": {"id": "byName", "options": "steps"},
         "properties": [{"id": "unit", "value": "short"}, {"id": "custom.axisPlacement", "value": "right"}]}]  # fmt: skip
    for p in PANELS:  # an override names a column the panel returns
        assert all(f" AS {col}" in p.sql for col in p.units), p.id
