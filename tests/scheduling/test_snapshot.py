import numpy as np
import pytest
from sched_builders import job, node, snap

from scheduling.node import NodeView
from scheduling.snapshot import PAD, CapacityError, ClusterSnapshot


def test_from_nodes_arrays_and_padding():
    s = snap(node("a", gpus=2, model="A10", cpu=8000, mem=100),
             node("b", cpu=4000, mem=50, healthy=False, topology={"rack": "r1"}),
             node("c", gpus=4, model="T4", gpu_alloc=(0, 300, 1000, 0), cpu_alloc_milli=1000))  # fmt: skip
    assert s.num_nodes == len(s) == 3 and s.max_gpus == 4
    assert list(s.node_ids) == ["a", "b", "c"] and s.index_of("c") == 2
    assert list(s.gpu_model) == ["A10", "", "T4"]
    assert s.gpu_free.tolist() == [[1000, 1000, PAD, PAD], [PAD] * 4, [1000, 700, 0, 1000]]
    assert s.gpu_free_milli.tolist() == [2000, 0, 2700]
    assert s.gpu_max_free.tolist() == [1000, PAD, 1000]
    assert s.gpu_full_free.tolist() == [2, 0, 2]
    assert s.cpu_free.tolist() == [8000, 4000, 31_000] and s.cpu_cap.tolist() == [8000, 4000, 32_000]
    assert s.healthy.tolist() == [True, False, True]
    assert list(s.topology_values("rack")) == ["", "r1", ""]
    assert s.model_mask(frozenset({"T4", "A10"})).tolist() == [True, False, True]
    with pytest.raises(KeyError, match="unknown node 'zz'"):
        s.index_of("zz")


def test_duplicate_node_ids_rejected():
    with pytest.raises(ValueError, match="duplicate node id"):
        snap(node("a"), node("a"))


def test_reserve_and_free_round_trip():
    s = snap(node("a", gpus=2, cpu=8000, mem=1000))
    before = s.copy()
    j = job("x", cpu=3000, mem=400, gpus=1, share=300, app="web")
    s.reserve(0, j, (1,))
    assert s.cpu_free[0] == 5000 and s.mem_free[0] == 600
    assert s.gpu_free[0].tolist() == [1000, 700] and s.gpu_free_milli[0] == 1700
    assert s.gpu_max_free[0] == 1000 and s.gpu_full_free[0] == 1
    assert s.instances("web").tolist() == [1]
    s.free(0, j, (1,))
    for name in ("cpu_free", "mem_free", "gpu_free", "gpu_free_milli", "gpu_max_free", "gpu_full_free"):
        assert np.array_equal(getattr(s, name), getattr(before, name)), name
    assert s.instances("web").tolist() == [0]


def test_reserve_checks_capacity_and_indices():
    s = snap(node("a", gpus=2, cpu=2000))
    with pytest.raises(CapacityError, match="cpu 2000m free < 3000m"):
        s.reserve(0, job("big", cpu=3000))
    s.reserve(0, job("g", cpu=0, gpus=1), (0,))
    with pytest.raises(CapacityError, match="GPU 0 has 0m free"):
        s.reserve(0, job("g2", cpu=0, gpus=1, share=100), (0,))
    with pytest.raises(ValueError, match="out of range"):
        s.reserve(0, job("g3", cpu=0, gpus=1), (2,))
    with pytest.raises(ValueError, match="needs 2 GPU"):
        s.reserve(0, job("g4", cpu=0, gpus=2), (1,))
    with pytest.raises(CapacityError):
        s.free(0, job("never-held", cpu=0, gpus=1), (1,))
    s.reserve(0, job("over", cpu=3000), check=False)  # honoured reservation may overcommit
    assert s.cpu_free[0] == -1000
    assert s.allocate == s.reserve


def test_copy_is_independent_and_empty_is_pristine():
    s = snap(node("a", gpus=1), node("b", gpus=1))
    c = s.copy()
    c.reserve(1, job("x", gpus=1, app="web"), (0,))
    c.set_healthy(0, False)
    assert s.gpu_free[1, 0] == 1000 and s.instances("web").tolist() == [0, 0] and s.healthy[0]
    e = c.empty()
    assert e.gpu_free[:, 0].tolist() == [1000, 1000] and e.healthy.all() and e.cpu_free.tolist() == [32000] * 2


def test_from_telemetry_node_view():
    from scheduling.events import NodeTelemetry

    t = NodeTelemetry(node_id="n", cpu_milli=4000, memory_mib=100, num_gpu=2, gpu_model="T4",
                      cpu_alloc_milli=1000, gpu_alloc_milli=[500, 0], healthy=False)  # fmt: skip
    s = ClusterSnapshot.from_nodes([NodeView.from_telemetry(t)])
    assert s.cpu_free[0] == 3000 and s.gpu_free[0].tolist() == [500, 1000] and not s.healthy[0]
    empty = ClusterSnapshot.from_nodes([NodeView.from_telemetry(t, with_allocation=False)])
    assert empty.cpu_free[0] == 4000 and empty.gpu_free[0].tolist() == [1000, 1000]


def test_a_snapshot_of_the_same_nodes_shares_the_previous_table():
    """A control loop snapshots its nodes every step: while their static facts stay the same the
    table (and everything cached on it) is shared; any change in them builds a new one."""
    import dataclasses

    nodes = [node("a", gpus=2, model="T4", cpu=8000, gpu_alloc=(500, 0)), node("b", cpu=4000),
             node("c", gpus=4, model="A10", topology={"rack": "r1"})]  # fmt: skip
    first = ClusterSnapshot.from_nodes(nodes)
    first.static_cache("probe", lambda s: object())
    busier = [dataclasses.replace(nodes[0], gpu_alloc_milli=(1000, 300), cpu_alloc_milli=2000), *nodes[1:]]
    again = ClusterSnapshot.from_nodes(busier, table=first.table)
    assert again.table is first.table and "probe" in first.table.derived
    assert again.gpu_free[0].tolist() == [0, 700, -1, -1] and again.cpu_free[0] == 6000  # the state is the new one
    changed = {
        "capacity": [dataclasses.replace(nodes[0], cpu_milli=16000), *nodes[1:]],
        "GPU model": [*nodes[:2], dataclasses.replace(nodes[2], gpu_model="V100M32")],
        "topology": [*nodes[:2], dataclasses.replace(nodes[2], topology={"rack": "r2"})],
        "order": [nodes[1], nodes[0], nodes[2]],
        "a node left": nodes[:2],
    }
    for what, other in changed.items():
        assert ClusterSnapshot.from_nodes(other, table=first.table).table is not first.table, what


def test_reserve_many_equals_reserving_one_by_one_and_refuses_bad_indices():
    """What a worker holds, rebuilt in one pass: the same arrays as reserve(check=False) one by one,
    over-commitment and app counts included; bad indices are refused with their reason."""
    nodes = [node(f"n{i}", gpus=(0, 2, 4)[i % 3], cpu=8000) for i in range(6)]
    held = [(1, job("a", gpus=1, share=300, app="web"), (0,)), (1, job("b", gpus=1, share=500, app="web"), (0,)),
            (2, job("c", gpus=2, cpu=6000), (1, 3)), (2, job("d", gpus=1, cpu=6000), (0,)),  # over-commits cpu
            (0, job("e", cpu=1000, app="db"), ()), (4, job("f", gpus=1), (0,)),
            (5, job("bad-gpu", gpus=1), (7,)), (9, job("bad-node"), ())]  # fmt: skip
    one, many = snap(*nodes), snap(*nodes)
    for i, j, g in held[:6]:
        one.reserve(i, j, g, check=False)
    refused = many.reserve_many(held)
    assert [(j.job_id, "out of range" in why) for j, why in refused] == [("bad-gpu", True), ("bad-node", True)]
    for name in ("cpu_free", "mem_free", "gpu_free", "gpu_free_milli", "gpu_max_free", "gpu_full_free"):
        np.testing.assert_array_equal(getattr(many, name), getattr(one, name), err_msg=name)
    for app in ("web", "db"):
        np.testing.assert_array_equal(many.instances(app), one.instances(app))
    assert many.cpu_free[2] < 0 and many.gpu_full_free[2] == 1  # (the cases the check above covers)
    assert snap(*nodes).reserve_many([]) == []


def test_first_difference_names_the_array_and_the_node_and_none_when_equal() -> None:
    from scheduling.job import JobRequest
    from scheduling.node import NodeView
    from scheduling.snapshot import ClusterSnapshot

    nodes = [NodeView(f"n{i}", cpu_milli=8000, memory_mib=8192, num_gpu=2, gpu_model="T4") for i in range(3)]
    a, b = ClusterSnapshot.from_nodes(nodes), ClusterSnapshot.from_nodes(nodes)
    assert a.first_difference(b) is None
    a.reserve(1, JobRequest("j", cpu_milli=1000, num_gpu=1, per_gpu_milli=500, app="web"), [0])
    assert a.first_difference(b) == "cpu_free of node n1: 7000 against 8000"
    b.reserve(1, JobRequest("j", cpu_milli=1000, num_gpu=1, per_gpu_milli=500), [0])
    assert a.first_difference(b) == "instances of app 'web' on node n1"  # the same resources, not the same apps
    b.set_healthy(2, False)
    assert a.first_difference(b) == "healthy of node n2: True against False"


def test_an_over_committed_gpu_is_none_free_not_less_and_the_filters_agree() -> None:
    """A holding the worker must honour (``check=False``) can drive one GPU below zero; its debt was
    taken off the node's free total, so the capacity filter refused a node with a whole GPU free
    (found by the scheduling review). Every way of getting there gives the arrays ``__init__`` does."""
    from scheduling.filters import run_filters

    nodes = [node("n0", gpus=2, gpu_alloc=(800, 0))]
    holding = (0, job("h", gpus=1, share=400), (0,))
    one, many = snap(*nodes), snap(*nodes)
    one.reserve(*holding, check=False)
    many.reserve_many([holding])
    built = ClusterSnapshot(one.table, one.cpu_free.copy(), one.mem_free.copy(), one.gpu_free.copy(), one.healthy.copy())
    for s in (one, many):
        assert s.gpu_free[0, 0] == -200 and s.gpu_free_milli[0] == 1000 and s.first_difference(built) is None
        assert run_filters(job("whole", gpus=1), s).feasible_count == 1
    one.free(*holding, check=False)
    assert one.gpu_free_milli[0] == 1200 and one.first_difference(snap(*nodes)) is None
