"""The jsonl loader (canonical events for producers), export, and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.traces import TraceLineError, available_traces, get_loader
from ops.traces.jsonl import JsonlLoader, write_jsonl
from ops.traces.openb import OpenbLoader


def test_events_and_offsets(fixtures: Path) -> None:
    loader = JsonlLoader(fixtures / "jsonl/events.jsonl")
    jobs = loader.load_jobs()
    assert [(j.event.job_id, j.offset_s) for j in jobs] == [("a", 0.0), ("d", 0.0), ("c", 5.5), ("b", 30.0)]
    assert jobs[0].event.gpu_milli == 500 and jobs[0].event.event_id == "job-a"
    assert [n.node_id for n in loader.nodes()] == ["n0", "n1"]
    assert loader.errors == []


def test_bad_lines(fixtures: Path) -> None:
    path = fixtures / "jsonl/events_broken.jsonl"
    loader = JsonlLoader(path)
    assert [j.event.job_id for j in loader.jobs()] == ["d", "c", "b"]
    assert [e.line for e in loader.errors] == [4, 6, 10]
    assert "cpu_milli" in loader.errors[0].reason
    assert loader.errors[1].reason.startswith("not JSON")
    assert "job_lifecycle" in loader.errors[2].reason
    with pytest.raises(TraceLineError, match=r"events_broken.jsonl:4: "):
        JsonlLoader(path, strict=True).load_jobs()


def test_path_required() -> None:
    with pytest.raises(ValueError, match="needs a path"):
        get_loader("jsonl")


def test_export_round_trip(tmp_path: Path, fixtures: Path) -> None:
    src = OpenbLoader(fixtures / "alibaba-gpu-2023")
    out = tmp_path / "openb.jsonl"
    assert write_jsonl(src.nodes(), src.jobs(), out) == 50 + 54
    back = JsonlLoader(out)
    assert [(j.offset_s, j.event) for j in back.jobs()] == [(j.offset_s, j.event) for j in src.jobs()]
    assert list(back.nodes()) == list(src.nodes())


def test_registry(monkeypatch: pytest.MonkeyPatch, fixtures: Path) -> None:
    assert [t.name for t in available_traces()] == ["openb", "dlrm2025", "google2011", "jsonl"]
    with pytest.raises(ValueError, match="unknown trace 'nope'"):
        get_loader("nope")
    monkeypatch.setenv("SEMSCHED_DATA_DIR", str(fixtures.parent))  # fixtures mirror <data>/traces
    info = {t.name: t for t in available_traces()}
    assert info["openb"].default_path == fixtures / "alibaba-gpu-2023/openb_pod_list_default.csv"
    assert info["jsonl"].default_path is None
    assert len(get_loader("openb").load_jobs()) == 54
    assert len(get_loader("dlrm2025", limit=7).load_jobs()) == 7
    assert get_loader("google2011").load_jobs()
    with pytest.raises(TypeError):
        get_loader("openb", no_such_option=1)
