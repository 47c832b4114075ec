from sched_builders import job, node, snap

from scheduling.filters import never_fits, run_filters


def test_kube_style_reason_and_first_filter_attribution():
    s = snap(*[node(f"t{i}", gpus=2, model="T4") for i in range(3)],
             node("a-busy", gpus=1, model="A10", gpu_alloc=(1000,)),
             node("a-sick", gpus=1, model="A10", healthy=False))  # fmt: skip
    r = run_filters(job(gpus=1, gpu_models=frozenset({"A10"})), s)
    assert r.feasible_count == 0 and not r.feasible_mask.any()
    assert r.rejected_by == {"health": 1, "gpu_model": 3, "capacity": 1}
    assert r.reason == "0/5 nodes are available: 3 GPU model not in [A10], 1 insufficient GPU, 1 node(s) unhealthy."


def test_feasible_nodes_and_fast_path_agree():
    s = snap(node("a", gpus=2, gpu_alloc=(400, 400)), node("b", gpus=1), node("c", cpu=500, gpus=1))
    j = job(gpus=1, share=700)
    full = run_filters(j, s)
    fast = run_filters(j, s, explain=False)
    assert full.feasible_mask.tolist() == fast.feasible_mask.tolist() == [False, True, False]
    assert full.rejected_by == {"gpu_share": 1, "capacity": 1}
    assert full.reason == "1/3 nodes are available: 1 insufficient cpu, 1 no single GPU with 700m free."
    assert fast.rejected_by == {} and fast.reason == ""


def test_never_fits_against_the_empty_cluster():
    s = snap(node("a", gpus=2, model="T4"), node("b", gpus=4, model="V100M16", healthy=False))
    s.reserve(0, job("x", gpus=2), (0, 1))
    # fits b when it recovers (and a when it drains): must wait, not be rejected
    assert never_fits(job(gpus=4), s) is None
    reason = never_fits(job(gpus=8), s)
    assert reason is not None and reason.startswith("never fits this cluster: 0/2 nodes")
    assert "2 insufficient GPU" in reason
    reason = never_fits(job(gpus=1, gpu_models=frozenset({"A10"})), s)
    assert reason is not None and "2 GPU model not in [A10]" in reason
    assert never_fits(job(cpu=64_000), s) is not None
    assert never_fits(job(gpus=1), snap()) is None  # nothing known yet: no verdict


def test_never_fits_is_kept_per_node_table_and_job_shape():
    """The answer is kept on the node table for the default chain, by filter_shape: asked again
    (another job of the shape, a copy of the snapshot, another free state) it is the same, while
    another table or a custom chain computes its own."""
    from scheduling.filters.capacity import CapacityFilter
    from scheduling.filters.framework import _never_fits

    s = snap(node("a", gpus=2, model="T4"), node("b", gpus=4, model="V100M16"))
    for j in (job("p", gpus=8), job("q", gpus=1, gpu_models=frozenset({"A10"})), job("t", gpus=1), job("r", gpus=4),
              job("s", cpu=64_000)):  # fmt: skip
        assert never_fits(j, s) == _never_fits(j, s, None)
    first = never_fits(job("p", gpus=8), s)
    busy = s.copy()
    busy.reserve(1, job("x", gpus=4), (0, 1, 2, 3))
    assert first is not None and never_fits(job("other", gpus=8), busy) is first  # kept, not recomputed
    assert never_fits(job("r", gpus=4), busy) is None  # busy now, but fits when b drains
    bigger = snap(node("a", gpus=2, model="T4"), node("b", gpus=8, model="V100M16"))
    assert never_fits(job("p", gpus=8), bigger) is None  # another table: its own answer
    only_capacity = (CapacityFilter(),)
    assert never_fits(job(gpus=1, gpu_models=frozenset({"A10"})), s, only_capacity) is None  # custom chain


def test_empty_cluster_reason():
    assert run_filters(job(), snap()).reason == "0/0 nodes are available: no nodes in the cluster."


class _OddNodes:
    """A plain filter without ``explain`` (only the protocol's three members)."""

    name = "odd"

    def mask(self, job, snapshot):
        import numpy as np

        return np.arange(snapshot.num_nodes) % 2 == 0

    def reason(self, job):
        return "odd node(s)"


def test_custom_filter_chain_without_explain():
    s = snap(node("a"), node("b"), node("c"))
    r = run_filters(job(), s, [_OddNodes()])
    assert r.feasible_mask.tolist() == [True, False, True]
    assert r.rejected_by == {"odd": 1} and r.reason == "2/3 nodes are available: 1 odd node(s)."
