import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ops.reports import Report
from ops.reports.report import fmt


def test_report_writes_markdown_json_and_pngs(tmp_path):
    console = Console(record=True, width=120)
    r = Report(tmp_path, "bench-x", "X benchmark", "semsched bench x --n 3", console=console)
    r.text("Some words.")
    r.table("Results", [{"policy": "a", "jct_s": 12.3456, "jobs": 1200}, {"policy": "b", "jct_s": None, "jobs": 7}])
    r.line_plot("curve", "Curve", "x", "y", {"a": ([0, 1, 2], [0, 1, 4])})
    r.cdf_plot("cdf", "JCT CDF", "seconds", {"a": [3, 1, 2], "empty": []})
    r.bar_plot("bars", "Bars", "%", {"a": 1.0, "b": 2.0}, reference={"a": 1.5})
    r.data("raw", {"values": [1.0, float("nan")]})
    paths = r.write()

    md = (tmp_path / "bench-x.md").read_text()
    assert md.startswith("# X benchmark")
    assert "| policy | jct_s | jobs |" in md and "| a | 12.35 | 1,200 |" in md and "| b | – | 7 |" in md
    for name in ("curve", "cdf", "bars"):
        png = tmp_path / f"bench-x-{name}.png"
        assert png in paths and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](bench-x-{name}.png)" in md
    data = json.loads((tmp_path / "bench-x.json").read_text())
    assert data["command"] == "semsched bench x --n 3"
    assert data["raw"] == {"values": [1.0, None]}  # NaN is not JSON
    assert data["tables"]["Results"][1] == {"policy": "b", "jct_s": None, "jobs": 7}
    assert "Results" in console.export_text()


def test_fmt():
    assert fmt(0.0123456) == "0.0123"
    assert fmt(1234.5) == "1,234" or fmt(1234.5) == "1,235"
    assert fmt(float("nan")) == "–"
    assert fmt(True) == "yes"


def test_a_directory_that_cannot_be_written_is_a_report_error_naming_it(tmp_path: Path) -> None:
    from ops.reports import ReportError

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = Report(blocker / "out", "bench-x", "X", "semsched bench x", console=Console(file=io.StringIO()))
    with pytest.raises(ReportError, match=f"cannot write the report to {blocker / 'out'}"):
        r.write()
