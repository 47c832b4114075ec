"""The jsonl loader (canonical events for producers), export, and the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.traces import TraceLineError, available_traces, get_loader
from ops.traces.base import TraceFormatError
from ops.traces.jsonl import JsonlLoader, write_jsonl
from ops.traces.openb import OpenbLoader
from scheduling.events import JobSubmitted


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


def test_bare_job_offsets_do_not_depend_on_an_enveloped_job_without_a_time(tmp_path: Path) -> None:
    """Found by review: an enveloped job without ``event_time`` (it gets the time it is read at) took
    part in the bare jobs' earliest time, so their offsets were months off and moved with the clock."""
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([
        '{"offset_s": 0, "event": {"kind": "job_submitted", "job_id": "a", "cluster": "c"}}',
        '{"kind": "job_submitted", "job_id": "b", "cluster": "c", "event_time": "2027-06-01T00:00:00Z"}',
        '{"kind": "job_submitted", "job_id": "c", "cluster": "c", "event_time": "2027-06-01T00:00:10Z"}',
    ]) + "\n")  # fmt: skip
    loader = JsonlLoader(p)
    assert sorted((j.event.job_id, j.offset_s) for j in loader.load_jobs()) == [("a", 0.0), ("b", 0.0), ("c", 10.0)]
    assert loader.errors == []


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_trace_piped_in_is_read_whole(tmp_path: Path, gzipped: bool) -> None:
    """A producer piped into the replay (``--path /dev/stdin``, a FIFO): the file is opened once. Found by
    review: a first open to look at the first bytes took a buffer's worth of lines away (27 of 2,000 jobs
    lost as one "bad line 1"), and a FIFO whose writer had finished hung."""
    import gzip
    import os
    import threading

    lines = [json.dumps({"offset_s": i, "event": {"kind": "job_submitted", "job_id": f"j{i}", "cpu_milli": 1000}})
             for i in range(2000)]  # ~150 KB: many pipe buffers
    data = ("\n".join(lines) + "\n").encode()
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(gzip.compress(data) if gzipped else data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    got: list[object] = []
    loader: JsonlLoader | None = None

    def load() -> None:
        nonlocal loader
        loader = JsonlLoader(fifo)
        got.extend(loader.load_jobs())

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "the load hung on the pipe"
    assert loader is not None and loader.errors == [] and len(got) == 2000


@pytest.mark.parametrize("how", ["bom", "gzip named .jsonl"])
def test_a_byte_order_mark_or_an_unnamed_gzip_file_reads_as_the_plain_file(tmp_path: Path, fixtures: Path,
                                                                            how: str) -> None:  # fmt: skip
    """Found by review: a leading BOM made line 1 "not JSON", and a gzip file without its ``.gz``
    name was "invalid UTF-8" on every line."""
    import gzip

    text = (fixtures / "jsonl/events.jsonl").read_bytes()
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + text if how == "bom" else gzip.compress(text))
    plain, loader = JsonlLoader(fixtures / "jsonl/events.jsonl"), JsonlLoader(p)
    assert [j.event for j in loader.load_jobs()] == [j.event for j in plain.load_jobs()]
    assert loader.errors == [] and list(loader.nodes()) == list(plain.nodes())


def test_a_csv_trace_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path, fixtures: Path) -> None:
    """Found by review: a spreadsheet's "CSV UTF-8" (a BOM first) failed the header check, file refused."""
    src = fixtures / "alibaba-gpu-2023"
    (tmp_path / "openb_node_list_gpu_node.csv").write_bytes((src / "openb_node_list_gpu_node.csv").read_bytes())
    pods = (src / "openb_pod_list_default.csv").read_bytes()
    (tmp_path / "openb_pod_list_default.csv").write_bytes(b"\xef\xbb\xbf" + pods)
    bom, plain = OpenbLoader(tmp_path), OpenbLoader(src)

    def jobs(loader: OpenbLoader) -> list[tuple[dict, float]]:  # (each load draws its own event ids and times)
        return [(j.event.model_dump(exclude={"event_id", "event_time"}), j.offset_s) for j in loader.load_jobs()]

    assert jobs(bom) == jobs(plain) and bom.errors == []


@pytest.mark.parametrize("in_first_line", [True, False])
def test_a_truncated_gz_file_says_where_it_stops(tmp_path: Path, fixtures: Path, in_first_line: bool) -> None:
    import gzip

    whole = gzip.compress((fixtures / "jsonl/events.jsonl").read_bytes())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[:20] if in_first_line else whole[: len(whole) // 2])
    with pytest.raises(TraceFormatError, match=r"cut.jsonl.gz:\d+: unreadable"):
        JsonlLoader(path, strict=True).load_jobs()
    if in_first_line:  # nothing readable: the file as a whole is refused
        with pytest.raises(TraceFormatError, match=r"cut.jsonl.gz:1: unreadable"):
            JsonlLoader(path).load_jobs()
        return
    # broken off half-way: the lines before the break are read, the break is one bad line
    loader = JsonlLoader(path)
    loader.load_jobs()
    assert loader.stats.lines > 0 and loader.stats.bad_lines == 1
    assert loader.errors[-1].reason.startswith("unreadable from here on")


def test_the_good_lines_before_a_truncated_gz_break_are_kept(tmp_path: Path) -> None:
    import gzip
    import random

    rng = random.Random(0)  # incompressible names: the cut lands in the middle of the lines
    lines = "".join(f'{{"offset_s": {i}, "event": {{"kind": "job_submitted", "job_id": "j{i}-{rng.getrandbits(64):x}"}}}}\n'
                    for i in range(400))  # fmt: skip
    whole = gzip.compress(lines.encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    loader = JsonlLoader(path)
    jobs = loader.load_jobs()
    assert 50 < len(jobs) < 400 and [j.event.job_id.split("-")[0] for j in jobs] == [f"j{i}" for i in range(len(jobs))]
    assert loader.stats.bad_lines == 1 and loader.errors[0].line == len(jobs) + 1


def test_a_node_line_without_its_source_is_an_inventory_entry(tmp_path: Path) -> None:
    """Found by review: it defaulted to an agent's report, which the simulated agents do not take for a node
    of theirs (they learn the inventory), and every job placed on it was refused as on an unknown node."""
    path = tmp_path / "trace.jsonl"
    path.write_text('{"kind": "node_telemetry", "node_id": "n1", "cluster": "c1", "cpu_milli": 8000, "memory_mib": 16384}\n'
                    '{"kind": "node_telemetry", "node_id": "n2", "cluster": "c1", "source": "agent", "cpu_milli": 8000, "memory_mib": 16384}\n'
                    '{"kind": "job_submitted", "job_id": "x", "event_time": "2026-01-01T00:00:00Z"}\n')  # fmt: skip
    loader = JsonlLoader(path)
    loader.load_jobs()
    assert [(n.node_id, n.source) for n in loader.nodes()] == [("n1", "inventory"), ("n2", "agent")]


def test_a_bare_job_line_without_its_time_is_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"kind": "job_submitted", "job_id": "x", "event_time": "2026-01-01T00:00:00Z"}\n'
                    '{"kind": "job_submitted", "job_id": "y"}\n'
                    '{"offset_s": 3, "event": {"kind": "job_submitted", "job_id": "z"}}\n')  # fmt: skip
    loader = JsonlLoader(path)
    assert [(j.event.job_id, j.offset_s) for j in loader.load_jobs()] == [("x", 0.0), ("z", 3.0)]
    assert [(e.line, e.reason.split(",")[0]) for e in loader.errors] == [(2, "a bare job line needs its event_time")]


def test_an_event_larger_than_the_worker_admits_is_a_bad_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It was published and then dead-lettered by the worker (or, at 2 MB, stopped the replay with
    the producer's MessageSizeTooLargeError and no line); now it is the file's line and why."""
    monkeypatch.setenv("SEMSCHED_MAX_MESSAGE_BYTES", "4096")
    labels = ", ".join(f'"k{i}": "{"v" * 50}"' for i in range(100))  # ~6 KB of labels
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"offset_s": 0, "event": {"kind": "job_submitted", "job_id": "small"}}\n'
                    f'{{"offset_s": 1, "event": {{"kind": "job_submitted", "job_id": "big", "labels": {{{labels}}}}}}}\n')  # fmt: skip
    loader = JsonlLoader(path)
    assert [j.event.job_id for j in loader.load_jobs()] == ["small"]
    assert len(loader.errors) == 1 and loader.errors[0].line == 2
    assert "bytes on the wire; the worker refuses events over 4,096 (SEMSCHED_MAX_MESSAGE_BYTES)" in loader.errors[0].reason
    with pytest.raises(TraceLineError, match=":2: the event is"):
        JsonlLoader(path, strict=True).load_jobs()


def test_the_size_limit_is_checked_on_the_event_as_the_replay_publishes_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: the loader measured the event as parsed; the replay re-stamps its time (with
    microseconds) and gives a job without an id a derived one, 14 bytes more here, so an event at the
    limit passed the loader and the worker dead-lettered it once published."""
    from ops.traces.published import published, replay_source
    from streams.admission import decode_or_reason

    limit = 4096
    monkeypatch.setenv("SEMSCHED_MAX_MESSAGE_BYTES", str(limit))
    base = {"kind": "job_submitted", "job_id": "big", "cluster": "c", "event_time": "2024-01-01T00:00:00Z"}
    bare = len(JobSubmitted.model_validate({**base, "labels": {"k": ""}}).to_bytes())
    for size, accepted in ((limit, False), (limit - 13, False), (limit - 14, True)):  # as parsed
        path = tmp_path / f"jobs-{size}.jsonl"
        path.write_text(json.dumps({**base, "labels": {"k": "x" * (size - bare)}}) + "\n")
        loader = JsonlLoader(path)
        jobs = loader.load_jobs()
        assert len(jobs) == accepted and len(loader.errors) == (not accepted), (size, loader.errors)
        for job in jobs:  # what the loader lets through, the worker admits as the replay sends it
            raw = published(job.event, replay_source(loader)).to_bytes()
            assert len(raw) == limit and not isinstance(decode_or_reason(raw, "jobs.submitted", limit), str)


def test_a_line_nested_too_deeply_is_a_bad_line(tmp_path: Path) -> None:
    """Found by review: JSON nested deeper than Python recurses raised RecursionError past the bad-line
    handler: a traceback, without the file's line."""
    def line(job: str, nested: str = "") -> str:
        return '{"offset_s": 0, "event": {"kind": "job_submitted", "job_id": "' + job + '"' + nested + "}}"

    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join([line("a"), line("b", ', "x": ' + "[" * 100_000 + "]" * 100_000), line("c")]) + "\n")
    loader = JsonlLoader(path)
    assert [j.event.job_id for j in loader.load_jobs()] == ["a", "c"]
    assert [(e.line, e.reason) for e in loader.errors] == [(2, "nested too deeply")]
    with pytest.raises(TraceLineError, match=r"deep.jsonl:2: "):
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
    with pytest.raises(ValueError, match="no option 'no_such_option'; its own: node_list, nodes_path"):
        get_loader("openb", no_such_option=1)  # (a TypeError about __init__'s arguments before)


@pytest.mark.parametrize(("trace", "option"), [("openb", "include_unscheduled"), ("dlrm2025", "include_preexisting")])
def test_a_yes_no_loader_option_takes_true_or_false_only(trace: str, option: str) -> None:
    from ops.traces import get_loader

    with pytest.raises(ValueError, match=f"option {option}='maybe': expected true or false"):
        get_loader(trace, None, **{option: "maybe"})


@pytest.mark.parametrize(("offset", "says"), [("Infinity", "finite number >= 0"), ("1e999", "finite number >= 0"),
                                              ("NaN", "finite number >= 0"), ("-1", "outside 0..315360000 s"),
                                              ("1e300", "outside 0..315360000 s")])  # fmt: skip
def test_an_offset_that_is_not_a_finite_time_ahead_is_a_bad_line(tmp_path: Path, offset: str, says: str) -> None:
    """Found by review: Infinity passed, the dry run reported a span of inf s, and a replay slept for ever; 1e300
    passed too (every format now has one bound: ops/traces/base.py, ``check_offset``)."""
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"offset_s": 0, "event": {"kind": "job_submitted", "job_id": "a"}}\n'
                    f'{{"offset_s": {offset}, "event": {{"kind": "job_submitted", "job_id": "b"}}}}\n')  # fmt: skip
    loader = JsonlLoader(path)
    assert [j.event.job_id for j in loader.load_jobs()] == ["a"]
    assert [e.line for e in loader.errors] == [2] and says in loader.errors[0].reason, loader.errors


@pytest.mark.parametrize(("option", "value", "says"), [
    ("headroom", "x", "option headroom='x': expected a number"),
    ("headroom", 0.5, "headroom must be a number >= 1"),
    ("cn_nodes", 1.5, "option cn_nodes=1.5: expected a whole number or null"),
    ("cn_nodes", -3, "cn_nodes must be a whole number of nodes >= 0"),
    ("hn_shape", {"cpu_milli": 1}, "hn_shape: "),
    ("hn_shape", {"cpu_milli": 8000, "memory_mib": 1024, "num_gpu": 2}, "hn_shape.gpu_model must be one of"),
    ("cn_shape", [1, 2], "cn_shape must be an object"),
    ("hn_shape", {"cpu_milli": 128000, "memory_mib": 1048576}, "hn_shape.num_gpu must be >= 1"),  # (review: a raw dump)
])  # fmt: skip
def test_a_dlrm_loader_option_of_the_wrong_kind_is_refused_when_given(option: str, value: object, says: str) -> None:
    """Found by review: these passed the constructor and raised TypeError / AttributeError from inside
    the replay (a traceback), or, for a negative count, made a cluster of no nodes without a word."""
    from ops.traces import get_loader

    with pytest.raises(ValueError, match=says.replace(".", r"\.")):
        get_loader("dlrm2025", None, **{option: value})


@pytest.mark.parametrize(("trace", "option", "value", "says"), [
    ("openb", "limit", 1.5, "option limit=1.5: expected a whole number or null"),
    ("openb", "limit", "abc", "option limit='abc': expected a whole number or null"),
    ("openb", "cluster", 5, "option cluster=5: expected a string"),
    ("openb", "node_list", "some", "option node_list='some': expected one of 'gpu', 'all'"),
    ("google2011", "machine_cpu_milli", "abc", "option machine_cpu_milli='abc': expected a whole number"),
    ("google2011", "machine_cpu_milli", -32000, "machine_cpu_milli must be a whole number from 1"),  # (review: a raw
    ("google2011", "machine_memory_mib", 0, "machine_memory_mib must be a whole number from 1"),  # dump; 0 memory)
])  # fmt: skip
def test_a_loader_option_of_the_wrong_type_is_refused_with_what_it_takes(trace: str, option: str, value: object,
                                                                        says: str) -> None:  # fmt: skip
    """Found by review: these went into the loader and failed far from the option (a traceback from a
    slice, or every line of the trace reported bad for one option)."""
    with pytest.raises(ValueError, match=says.replace(".", r"\.")):
        get_loader(trace, None, **{option: value})


def test_bare_job_lines_more_than_ten_years_apart_are_bad_lines(tmp_path: Path) -> None:
    """Found by review: a bare line's offset (its event_time less the first's) had no bound; two jobs 30 years
    apart made a replay of 946,771,200 s."""
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"kind": "job_submitted", "job_id": "a", "event_time": "2000-01-01T00:00:00Z"}\n'
                    '{"kind": "job_submitted", "job_id": "b", "event_time": "2030-01-01T00:00:00Z"}\n'
                    '{"kind": "job_submitted", "job_id": "c", "event_time": "2000-01-02T00:00:00Z"}\n')  # fmt: skip
    loader = JsonlLoader(path)
    assert [(j.event.job_id, j.offset_s) for j in loader.load_jobs()] == [("a", 0.0), ("c", 86_400.0)]
    assert [e.line for e in loader.errors] == [2] and "outside 0..315360000 s" in loader.errors[0].reason
