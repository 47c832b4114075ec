import numpy as np
import pytest
from sched_builders import job, node, snap

from scheduling.assign import schedule_step
from scheduling.order_context import OrderContext
from scheduling.orderings import get_ordering
from scheduling.policies import (
    BasePolicy,
    Policy,
    UnknownPolicyError,
    available_policies,
    get_policy,
    register,
    unregister,
)
from scheduling.policies.registry import available_orderings, is_policy_name


def ids(jobs):
    return [j.job_id for j in jobs]


def test_composed_policy_orders_like_the_ordering_and_scores_like_the_placement():
    p = get_policy("sjf-oracle+best-fit")
    assert p.name == "sjf-oracle+best-fit" and isinstance(p, Policy)
    jobs = [job("long", trace_duration_s=9.0), job("short", trace_duration_s=1.0)]
    assert ids(p.order(jobs, 0.0)) == ["short", "long"]
    cluster = snap(node("a", cpu=4000), node("b", cpu=2000))
    mask = np.ones(2, dtype=bool)
    np.testing.assert_array_equal(p.score(job("x"), cluster, mask), get_policy("best-fit").score(job("x"), cluster, mask))


def test_plain_placement_keeps_fifo_and_fifo_composition_changes_nothing():
    jobs = [job("b", submit_time=2.0, trace_duration_s=1.0), job("a", submit_time=1.0, trace_duration_s=9.0)]
    assert ids(get_policy("best-fit").order(jobs, 0.0)) == ["a", "b"]
    cluster = snap(node("n1", cpu=3000), node("n2", cpu=8000))
    work = [job(f"j{i}", cpu=1000 + 500 * i, submit_time=float(i)) for i in range(5)]
    plain = schedule_step(cluster, work, get_policy("best-fit"), now=10.0)
    composed = schedule_step(cluster, work, get_policy("fifo+best-fit"), now=10.0)
    assert [(p.job_id, p.node_id) for p in plain.placements] == [(p.job_id, p.node_id) for p in composed.placements]
    assert composed.placements[0].reason.startswith("fifo+best-fit: ")


def test_ordering_changes_who_gets_the_last_slot():
    cluster = snap(node("n", cpu=2000))
    work = [job("long", cpu=2000, trace_duration_s=100.0, submit_time=0.0),
            job("short", cpu=2000, trace_duration_s=1.0, submit_time=1.0)]  # fmt: skip
    assert [p.job_id for p in schedule_step(cluster, work, get_policy("best-fit"), now=2.0).placements] == ["long"]
    sjf = schedule_step(cluster, work, get_policy("sjf-oracle+best-fit"), now=2.0, context=OrderContext())
    assert [p.job_id for p in sjf.placements] == ["short"]


def test_kwargs_reach_placement_and_ordering_options_reach_ordering():
    p = get_policy("las+best-fit", ordering_options={"promote_knob": 4.0}, gpu_weight=1, cpu_weight=0, memory_weight=0)
    assert p.weights == (1.0, 0.0, 0.0)  # placement attributes stay reachable
    assert p.ordering.promote_knob == 4.0
    with pytest.raises(TypeError, match="plain placement"):
        get_policy("best-fit", ordering_options={"promote_knob": 4.0})


def test_placement_select_gpus_is_used_through_the_composition():
    @register("test-last-gpu")
    class LastGpu(BasePolicy):
        name = "test-last-gpu"

        def score(self, job, snapshot, feasible_mask):
            return np.zeros(snapshot.num_nodes)

        def select_gpus(self, snapshot, node_index, job):
            return (int(snapshot.table.num_gpu[node_index]) - 1,)

    try:
        cluster = snap(node("g", gpus=4))
        res = schedule_step(cluster, [job("x", gpus=1)], get_policy("drf+test-last-gpu"), now=0.0)
        assert res.placements[0].gpu_indices == (3,)
        default = schedule_step(cluster, [job("x", gpus=1)], get_policy("drf+best-fit"), now=0.0)
        assert default.placements[0].gpu_indices == (0,)
    finally:
        unregister("test-last-gpu")


def test_listing_and_name_checks():
    assert not any("+" in name for name in available_policies())
    assert {"fifo", "sjf-oracle", "sjf-predicted", "las", "priority", "drf"} <= set(available_orderings())
    assert is_policy_name("best-fit") and is_policy_name("drf+best-fit") and is_policy_name("priority+fifo-first-fit")
    assert not is_policy_name("drf") and not is_policy_name("drf+") and not is_policy_name("nope+best-fit")
    assert get_ordering("drf").name == "drf"


@pytest.mark.parametrize("name", ["no-such-policy", "nope+best-fit", "drf+nope", "drf", "+best-fit"])
def test_unknown_names_list_placements_and_orderings(name):
    with pytest.raises(UnknownPolicyError) as e:
        get_policy(name)
    msg = str(e.value)
    assert f"unknown policy {name!r}" in msg
    assert "best-fit" in msg and "fifo-first-fit" in msg
    assert "orderings: " in msg and "sjf-oracle" in msg and "drf+best-fit" in msg
