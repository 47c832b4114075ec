"""``bench snapshot`` on the openb nodes: both ways agree with the truth at every step, and its
table is what the JSON holds. (Its timings are printed, never asserted.)"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ops.bench import snapshot as bench_snapshot
from ops.bench.snapshot import run_snapshot_bench
from ops.cli.main import app


def test_runs_both_ways_on_the_openb_nodes_and_writes_the_json(tmp_path: Path) -> None:
    out = tmp_path / "bench-snapshot.json"
    assert run_snapshot_bench(held=[50, 200], changes=8, repeat=3, out=out) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["held"] for r in rows] == [50, 200] and all(r["changes"] == 8 for r in rows)
    assert all(r["afresh_ms"]["n"] == 3 and r["kept_ms"]["n"] == 3 for r in rows)


def test_a_kept_snapshot_that_drifts_from_the_truth_fails_the_run(tmp_path: Path, monkeypatch) -> None:
    def finish_without_freeing_the_truth(self, job_id):  # type: ignore[no-untyped-def]
        self.rows.pop(job_id)

    monkeypatch.setattr(bench_snapshot._Table, "finish", finish_without_freeing_the_truth)
    assert run_snapshot_bench(held=[50], changes=4, repeat=2, out=None) == 1


def test_a_bad_size_list_is_refused_with_its_option() -> None:
    result = CliRunner().invoke(app, ["bench", "snapshot", "--held", "10,x"])
    assert result.exit_code == 2 and "--held" in result.output
