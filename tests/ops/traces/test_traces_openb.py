"""The openb (Alibaba GPU 2023) loader: field mapping, sorting, counts, bad lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.traces import TraceFormatError, TraceLineError, get_loader
from ops.traces.openb import OpenbLoader


def _by_id(loader: OpenbLoader) -> dict:
    return {j.event.job_id: j for j in loader.jobs()}


def test_known_pod_mapping(fixtures: Path) -> None:
    jobs = _by_id(OpenbLoader(fixtures / "alibaba-gpu-2023"))
    j = jobs["openb-pod-0001"]  # openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
    e = j.event
    assert j.offset_s == 427061
    assert (e.cpu_milli, e.memory_mib, e.num_gpu, e.gpu_milli) == (6000, 12288, 1, 460)
    assert e.qos == "LS" and e.cluster == "openb" and e.name == "openb-pod-0001"
    assert e.gpu_models == [] and e.labels == {"trace": "openb", "pod_phase": "Running"}
    assert e.trace_duration_s == 12902960 - 427061
    cpu_only = jobs["openb-pod-0005"].event  # num_gpu 0, gpu_milli 0
    assert (cpu_only.num_gpu, cpu_only.gpu_milli) == (0, 0)
    whole = jobs["openb-pod-2182"].event  # 4 whole GPUs
    assert (whole.num_gpu, whole.gpu_milli, whole.gpu_demand_milli) == (4, 1000, 4000)
    assert whole.qos == "LS" and whole.labels["pod_phase"] == "Failed"


def test_pending_pods_are_kept_without_duration(fixtures: Path) -> None:
    loader = OpenbLoader(fixtures / "alibaba-gpu-2023")
    pending = _by_id(loader)["openb-pod-0061"]
    assert pending.event.trace_duration_s is None and pending.event.labels["pod_phase"] == "Pending"
    assert pending.offset_s == 10001278
    assert loader.stats.notes["duration_missing"] == 2
    dropped = OpenbLoader(fixtures / "alibaba-gpu-2023", include_unscheduled=False)
    assert len(dropped.load_jobs()) == 52 and dropped.stats.notes["unscheduled_dropped"] == 2


def test_sorted_and_counted(fixtures: Path) -> None:
    loader = OpenbLoader(fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv")
    offsets = [j.offset_s for j in loader.jobs()]
    assert offsets == sorted(offsets) and len(offsets) == 54
    assert loader.errors == [] and loader.stats.bad_lines == 0


def test_nodes(fixtures: Path) -> None:
    nodes = list(OpenbLoader(fixtures / "alibaba-gpu-2023").nodes())
    assert len(nodes) == 50
    n = nodes[0]  # openb-node-0000,64000,262144,2,P100
    assert (n.node_id, n.cpu_milli, n.memory_mib, n.num_gpu, n.gpu_model) == (
        "openb-node-0000",
        64000,
        262144,
        2,
        "P100",
    )
    assert n.source == "inventory" and n.cluster == "openb"
    everything = list(OpenbLoader(fixtures / "alibaba-gpu-2023", node_list="all").nodes())
    assert len(everything) == 50 and everything[0].num_gpu == 0 and everything[0].gpu_model is None
    assert everything[-1].gpu_model == "T4" and everything[-1].num_gpu == 2  # openb-node-0334


def test_gpu_spec_split(tmp_path: Path, fixtures: Path) -> None:
    src = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()
    p = tmp_path / "pods.csv"
    p.write_text("\n".join([src[0], "x,1000,1024,1,1000,V100M16|V100M32,BE,Running,5,9,6", ""]))
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    (job,) = loader.jobs()
    assert job.event.gpu_models == ["V100M16", "V100M32"] and job.event.trace_duration_s == 3


def test_bad_lines_reported_with_line_numbers(fixtures: Path) -> None:
    path = fixtures / "alibaba-gpu-2023" / "openb_pod_list_broken.csv"
    loader = OpenbLoader(path)
    assert len(loader.load_jobs()) == 54 - 5
    assert [e.line for e in loader.errors] == [4, 7, 10, 13, 16]
    assert all(e.path == str(path) for e in loader.errors)
    reasons = [e.reason for e in loader.errors]
    assert "cpu_milli is not a number: 'abc'" in reasons[0]
    assert "expected 11 fields, got 10" in reasons[1]
    assert "duplicate pod 'openb-pod-0000' (first at line 2)" in reasons[2]
    assert "qos" in reasons[3]
    assert "creation_time is empty" in reasons[4]
    assert loader.stats.bad_lines == 5


def test_strict_raises_first_bad_line(fixtures: Path) -> None:
    path = fixtures / "alibaba-gpu-2023" / "openb_pod_list_broken.csv"
    with pytest.raises(TraceLineError) as ei:
        OpenbLoader(path, strict=True).load_jobs()
    e = ei.value
    assert (e.path, e.line) == (str(path), 4)
    assert str(e) == f"{path}:4: cpu_milli is not a number: 'abc'"


def test_fractional_share_on_multi_gpu_pod_is_bad(tmp_path: Path, fixtures: Path) -> None:
    header = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()[0]
    p = tmp_path / "pods.csv"
    p.write_text(f"{header}\nok,1000,1024,1,500,,BE,Running,1,3,2\nbad,1000,1024,2,500,,BE,Running,1,3,2\n")
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    assert [j.event.job_id for j in loader.jobs()] == ["ok"]
    assert loader.errors[0].line == 3 and "fractional gpu_milli" in loader.errors[0].reason


def test_wrong_header_is_fatal(tmp_path: Path) -> None:
    p = tmp_path / "pods.csv"
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(TraceFormatError, match=r"pods.csv:1: expected header"):
        OpenbLoader(p).load_jobs()


def test_selection_window_duration_sample_limit(fixtures: Path) -> None:
    d = fixtures / "alibaba-gpu-2023"
    win = OpenbLoader(d, start_offset=5_000_000, end_offset=10_100_000)
    assert all(5_000_000 <= j.offset_s < 10_100_000 for j in win.jobs())
    assert win.stats.outside_window + win.stats.selected == 54
    dur = OpenbLoader(d, max_duration_s=3600)
    kept = dur.load_jobs()
    assert kept and all(j.event.trace_duration_s <= 3600 for j in kept)
    assert dur.stats.duration_unknown == 2
    assert dur.stats.duration_out_of_range + dur.stats.duration_unknown + len(kept) == 54
    a = [j.event.job_id for j in OpenbLoader(d, sample=10, seed=7).jobs()]
    b = [j.event.job_id for j in OpenbLoader(d, sample=10, seed=7).jobs()]
    c = [j.event.job_id for j in OpenbLoader(d, sample=10, seed=8).jobs()]
    assert a == b and a != c and len(a) == 10
    frac = OpenbLoader(d, sample=0.5)
    assert len(frac.load_jobs()) == 27 and frac.stats.sampled_out == 27
    lim = OpenbLoader(d, limit=5)
    assert len(lim.load_jobs()) == 5 and lim.stats.over_limit == 49


def test_full_shared_file_counts(shared_traces: Path) -> None:
    loader = get_loader("openb")
    assert len(loader.load_jobs()) == 8152
    assert len(list(loader.nodes())) == 1213
    assert loader.errors == []
    assert sum(1 for j in loader.jobs() if j.event.trace_duration_s is None) == 897
    assert len(list(get_loader("openb", node_list="all").nodes())) == 1523


@pytest.mark.parametrize("closed_later", [False, True])
def test_a_stray_quote_is_one_bad_line_and_the_rows_after_it_are_kept(tmp_path: Path, fixtures: Path,
                                                                      closed_later: bool) -> None:  # fmt: skip
    """Found by review: one reader over the file ran the quoted field on into the following lines,
    so every later row (or every row up to a second stray quote) vanished into one bad record,
    reported at the end of the file with a wrong line number."""
    src = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()
    rows = src[1:41]
    rows[1] = rows[1].replace(",LS,", ',"V100,LS,', 1) if ",LS," in rows[1] else rows[1].replace(",BE,", ',"V100,BE,', 1)
    if closed_later:
        rows[5] = rows[5].replace(",LS,", ',V100",LS,', 1) if ",LS," in rows[5] else rows[5].replace(",BE,", ',V100",BE,', 1)
    p = tmp_path / "pods.csv"
    p.write_text("\n".join([src[0], *rows]) + "\n")
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    jobs = loader.load_jobs()
    bad = [3, 7] if closed_later else [3]
    assert [e.line for e in loader.errors] == bad, [str(e) for e in loader.errors]
    assert len(jobs) == 40 - len(bad) and loader.stats.bad_lines == len(bad)


@pytest.mark.parametrize("at", [0, 3])
def test_a_field_over_the_csv_limit_is_that_line_alone(tmp_path: Path, fixtures: Path, at: int) -> None:
    """Found by review: the csv module's error on an oversized field (a damaged file's long run of
    bytes without a newline) was blamed on the next line, and every line after it was dropped (the
    whole file refused when it was the first data row)."""
    src = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()
    rows = src[1:11]
    rows.insert(at, "junk-" + "x" * 140_000 + ",1000,1000,1,500,,LS,Running,0,10,0")
    p = tmp_path / "pods.csv"
    p.write_text("\n".join([src[0], *rows]) + "\n")
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    jobs = loader.load_jobs()
    assert [(e.line, "field larger than field limit" in e.reason) for e in loader.errors] == [(at + 2, True)]
    assert len(jobs) == 10 and loader.stats.bad_lines == 1


def test_when_a_pod_ran_scheduled_to_deleted(fixtures: Path) -> None:
    jobs = _by_id(OpenbLoader(fixtures / "alibaba-gpu-2023"))
    assert (jobs["openb-pod-0001"].started_s, jobs["openb-pod-0001"].ended_s) == (427061, 12902960)
    pending = jobs["openb-pod-0061"]  # never placed: never ran
    assert pending.started_s is None


def test_a_pod_larger_than_the_worker_admits_is_a_bad_line(tmp_path: Path, fixtures: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: a pod with a GPU-model list of 15,000 entries passed the dry run, and the real replay
    stopped at it (the producer refuses it) with the pods after it unsent; as in the jsonl loader, it is
    now the file's line and why, in every loader (ops/traces/base.py, ``_on_the_wire``)."""
    monkeypatch.setenv("SEMSCHED_MAX_MESSAGE_BYTES", "4096")
    src = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()
    fields = src[3].split(",")
    fields[5] = "|".join(["V100M16"] * 1000)  # gpu_spec: ~8 KB
    p = tmp_path / "pods.csv"
    p.write_text("\n".join([*src[:3], ",".join(fields), *src[4:8]]) + "\n")
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    assert len(loader.load_jobs()) == 6
    assert [e.line for e in loader.errors] == [4], loader.errors
    assert "bytes on the wire; the worker refuses events over 4,096" in loader.errors[0].reason


def test_a_carriage_return_inside_a_line_is_one_bad_line_and_no_job(tmp_path: Path, fixtures: Path) -> None:
    """Found by review: a lone CR split the line in two, the half after it was accepted as a pod named
    "-0002" with pod 0002's request, and every later line's number was one too high. CRLF line ends are
    still line ends, and a well-encoded U+FFFD is text, not "invalid UTF-8"."""
    src = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()
    rows = src[1:7]
    rows[1] = rows[1].replace("openb-pod-", "openb-pod\r-", 1)
    fields = rows[3].split(",")
    rows[3] = ",".join([fields[0], "x", *fields[2:]])  # a cpu_milli that is no number
    rows[4] = rows[4].replace("openb-pod-", "openb-pod-\ufffd", 1)
    p = tmp_path / "pods.csv"
    p.write_bytes(("\r\n".join([src[0], *rows]) + "\r\n").encode())
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    names = [j.event.job_id for j in loader.load_jobs()]
    assert [e.line for e in loader.errors] == [3, 5], loader.errors  # the CR's line, then the bad number
    assert len(names) == 4 and not any(n.startswith("-") for n in names)
    assert any("\ufffd" in n for n in names)


def test_a_blank_share_or_qos_and_a_deletion_before_the_schedule_are_bad_lines(tmp_path: Path, fixtures: Path) -> None:
    """Found by review: a blank gpu_milli was taken for a whole GPU and a blank qos for BE, unreported, and a
    pod deleted before it was scheduled was kept without a duration (dlrm2025's loader refuses that line)."""
    header = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()[0]
    p = tmp_path / "pods.csv"
    p.write_text("\n".join([header, "a,1000,1024,1,,V100M16,LS,Running,5,9,6", "b,1000,1024,1,460,,,Running,5,9,6",
                            "c,1000,1024,1,460,,LS,Running,5,9,12", "d,1000,1024,1,460,,LS,Running,5,9,6"]) + "\n")
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    assert [j.event.job_id for j in loader.load_jobs()] == ["d"]
    assert [(e.line, e.reason) for e in loader.errors] == [
        (2, "gpu_milli is empty"), (3, "qos is empty"), (4, "deletion_time 9 before scheduled_time 12")]


@pytest.mark.parametrize("created", ["-500", "1e300"])
def test_a_creation_time_outside_ten_years_from_the_start_is_a_bad_line(tmp_path: Path, fixtures: Path,
                                                                        created: str) -> None:  # fmt: skip
    """Found by review: -500 was submitted before the trace began, and 1e300 made the dry run announce a
    replay of 1e300 s (and `bench trace` a makespan of 1e300 s)."""
    header = (fixtures / "alibaba-gpu-2023" / "openb_pod_list_default.csv").read_text().splitlines()[0]
    p = tmp_path / "pods.csv"
    p.write_text("\n".join([header, f"a,1000,1024,0,0,,LS,Running,{created},,", "b,1000,1024,0,0,,LS,Running,5,9,6"]))
    loader = OpenbLoader(p, nodes_path=fixtures / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv")
    assert [j.event.job_id for j in loader.load_jobs()] == ["b"]
    assert [e.line for e in loader.errors] == [2] and "outside 0..315360000 s" in loader.errors[0].reason
