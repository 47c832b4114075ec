"""The dlrm2025 (Alibaba GPU 2025) loader: mapping, pre-existing instances, the synthesised
inventory, bad lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.traces import TraceLineError, get_loader
from ops.traces.dlrm2025 import DlrmLoader, gpu_fields
from ops.traces.dlrm_inventory import NodeShape

CSV = "alibaba-gpu-2025/disaggregated_DLRM_trace.csv"


def _by_id(loader: DlrmLoader) -> dict:
    return {j.event.job_id: j for j in loader.jobs()}


def test_known_instance_mapping(fixtures: Path) -> None:
    jobs = _by_id(DlrmLoader(fixtures / CSV))
    # instance_7680,HN,app_0,12,12,1,1,25,25,120.0,120.0,680.0,800.0,8,124191.0…,124561.0…,136023.0
    j = jobs["instance_7680"]
    e = j.event
    assert j.offset_s == pytest.approx(124191)
    assert (e.cpu_milli, e.memory_mib, e.num_gpu, e.gpu_milli) == (12000, 120 * 1024, 1, 1000)
    assert e.app == "app_0" and e.max_instances_per_node == 8 and e.qos == "LS" and e.cluster == "dlrm2025"
    assert e.trace_duration_s == pytest.approx(136023 - 124561)
    assert e.labels == {"trace": "dlrm2025", "role": "HN", "pool": "HN", "lifetime": "complete",
                        "rdma_request_pct": "25", "disk_request_gib": "680"}  # fmt: skip
    cn = jobs["instance_8160"].event  # CN, max_instance_per_node -1
    assert (cn.num_gpu, cn.gpu_milli, cn.cpu_milli, cn.max_instances_per_node) == (0, 0, 64000, None)
    assert cn.labels["role"] == cn.labels["pool"] == "CN"  # (the node-pool filter reads "pool")


def test_preexisting_instances(fixtures: Path) -> None:
    loader = DlrmLoader(fixtures / CSV)
    jobs = _by_id(loader)
    pre = jobs["instance_3840"]  # no creation time, deleted at 1013037
    assert pre.offset_s == 0.0 and pre.event.labels["lifetime"] == "created_before_window"
    assert pre.event.trace_duration_s == pytest.approx(1013037)
    forever = jobs["instance_0"]  # no times at all: ran through the whole window
    assert forever.offset_s == 0.0 and forever.event.trace_duration_s is None
    n_pre = loader.stats.notes["preexisting"]
    only_new = DlrmLoader(fixtures / CSV, include_preexisting=False)
    assert len(only_new.load_jobs()) == 50 - n_pre
    assert only_new.stats.notes["preexisting_dropped"] == n_pre


def test_gpu_request_mapping() -> None:
    assert gpu_fields(0) == (0, 0)
    assert gpu_fields(1) == (1, 1000)
    assert gpu_fields(0.25) == (1, 250)
    assert gpu_fields(4) == (4, 1000)
    with pytest.raises(ValueError, match="fractional"):
        gpu_fields(1.5)


def test_sorted(fixtures: Path) -> None:
    offsets = [j.offset_s for j in DlrmLoader(fixtures / CSV).jobs()]
    assert offsets == sorted(offsets) and len(offsets) == 50


def test_synthesised_inventory_is_deterministic_and_fits(fixtures: Path) -> None:
    a = DlrmLoader(fixtures / CSV)
    nodes = list(a.nodes())
    again = list(DlrmLoader(fixtures / CSV).nodes())
    assert [(n.node_id, n.cpu_milli, n.num_gpu) for n in nodes] == [
        (n.node_id, n.cpu_milli, n.num_gpu) for n in again
    ]
    cn = [n for n in nodes if n.topology["pool"] == "CN"]
    hn = [n for n in nodes if n.topology["pool"] == "HN"]
    assert cn and hn and all(n.source == "inventory" for n in nodes)
    assert all(n.num_gpu == 8 and n.gpu_model == "A10" for n in hn)
    assert all(n.num_gpu == 0 and n.cpu_milli == 192_000 for n in cn)
    for pool, ns in (("CN", cn), ("HN", hn)):
        s = a.sizing[pool]
        assert len(ns) == s["nodes"] >= s["anti_affinity_min_nodes"]
        assert len(ns) * ns[0].cpu_milli >= s["peak_cpu_milli"]
        assert len(ns) * ns[0].memory_mib >= s["peak_memory_mib"]
    fixed = DlrmLoader(
        fixtures / CSV,
        cn_nodes=3,
        hn_nodes=2,
        hn_shape=NodeShape(cpu_milli=96_000, memory_mib=512 * 1024, num_gpu=4, gpu_model="T4"),
    )
    fixed_nodes = list(fixed.nodes())
    assert [n.node_id for n in fixed_nodes] == [f"dlrm-cn-000{i}" for i in range(3)] + [
        "dlrm-hn-0000",
        "dlrm-hn-0001",
    ]
    assert fixed_nodes[-1].gpu_model == "T4" and fixed_nodes[-1].num_gpu == 4


def test_bad_lines(fixtures: Path) -> None:
    path = fixtures / "alibaba-gpu-2025/disaggregated_DLRM_trace_broken.csv"
    loader = DlrmLoader(path)
    assert len(loader.load_jobs()) == 47
    assert [(e.line, e.path) for e in loader.errors] == [(3, str(path)), (6, str(path)), (9, str(path))]
    assert "gpu_request=1.5" in loader.errors[0].reason
    assert "role must be CN or HN, not 'XN'" in loader.errors[1].reason
    assert "max_instance_per_node=0" in loader.errors[2].reason
    with pytest.raises(TraceLineError) as ei:
        DlrmLoader(path, strict=True).load_jobs()
    assert ei.value.line == 3 and str(ei.value).startswith(f"{path}:3: ")


@pytest.mark.parametrize("gpus", ["1", "0.5"])
def test_a_cpu_node_instance_asking_for_gpus_is_a_bad_line(tmp_path: Path, fixtures: Path, gpus: str) -> None:
    """Found by review: a CN row with a GPU request grew the CPU pool's node shape GPUs of no model, and
    the inventory failed with a validation dump naming no line (exit 2, as for a bad option)."""
    src = (fixtures / "alibaba-gpu-2025/disaggregated_DLRM_trace.csv").read_text().splitlines()
    cn = next(i for i, row in enumerate(src) if row.split(",")[1] == "CN")
    fields = src[cn].split(",")
    fields[5] = gpus
    src[cn] = ",".join(fields)
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(src) + "\n")
    loader = DlrmLoader(path)
    jobs = loader.load_jobs()
    assert [(e.line, e.reason) for e in loader.errors] == [(cn + 1, f"a CN (CPU node) instance asks for no GPUs: gpu_request is {gpus}")]
    assert len(jobs) == len(src) - 2 and list(loader.nodes())  # the others, and an inventory for them


def test_full_shared_file(shared_traces: Path) -> None:
    loader = get_loader("dlrm2025")
    jobs = loader.load_jobs()
    assert len(jobs) == 23871 and loader.errors == []
    assert loader.stats.notes["preexisting"] == 7280
    roles = [j.event.labels["role"] for j in jobs]
    assert roles.count("CN") == 16485 and roles.count("HN") == 7386
    assert len({j.event.app for j in jobs}) == 156
    nodes = list(loader.nodes())
    assert sum(n.num_gpu for n in nodes) >= loader.sizing["HN"]["peak_gpus"]


def test_when_an_instance_ran_scheduled_to_deleted(fixtures: Path) -> None:
    jobs = _by_id(DlrmLoader(fixtures / CSV))
    done = jobs["instance_7680"]
    assert (done.started_s, done.ended_s) == (pytest.approx(124561, abs=1), pytest.approx(136023))
    forever = jobs["instance_0"]  # ran before the window and through it
    assert (forever.started_s, forever.ended_s) == (0.0, None)
