from sched_builders import job, node, snap

from scheduling.filters import MaxInstancesFilter


def test_per_app_cap():
    s = snap(node("a"), node("b"), node("c"))
    web = job("w", app="web", max_instances_per_node=2)
    s.reserve(0, web)
    s.reserve(0, web)
    s.reserve(1, web)
    s.reserve(2, job("other", app="db"))
    f = MaxInstancesFilter()
    assert f.mask(web, s).tolist() == [False, True, True]
    assert f.mask(job("w1", app="web", max_instances_per_node=1), s).tolist() == [False, False, True]
    assert f.reason(web) == "node(s) already run 2 instance(s) of app web"


def test_no_app_or_no_cap_passes():
    s = snap(node("a"))
    s.reserve(0, job("w", app="web"))
    f = MaxInstancesFilter()
    assert f.mask(job(app="web"), s).all()
    assert f.mask(job(max_instances_per_node=1), s).all()


def test_the_limit_of_an_instance_already_there_binds_a_newcomer_too():
    """Found by review: only the newcomer's own limit was checked, so a web job of limit 3 joined one of limit 1
    (kube-scheduler's required anti-affinity is symmetric). Freed, the node takes it again."""
    s = snap(node("a"), node("b"))
    one = job("one", app="web", max_instances_per_node=1)
    s.reserve(0, one)
    f = MaxInstancesFilter()
    assert f.mask(job("three", app="web", max_instances_per_node=3), s).tolist() == [False, True]
    assert f.mask(job("free", app="web"), s).tolist() == [False, True]
    assert "as their max_instances_per_node allows" in f.reason(job("free", app="web"))
    assert f.mask(job("db", app="db", max_instances_per_node=1), s).tolist() == [True, True]
    copy = s.copy()
    s.free(0, one)
    assert f.mask(job("three", app="web", max_instances_per_node=3), s).tolist() == [True, True]
    assert s.first_difference(copy) is not None and copy.instance_cap("web").tolist()[0] == 1
    # freed, it is the snapshot of nodes that never held it (the worker's kept snapshot against a rebuilt one)
    assert s.instance_cap("web") is None and s.first_difference(snap(node("a"), node("b"))) is None


def test_a_snapshot_built_from_many_holdings_keeps_their_limits():
    s = snap(node("a"), node("b"))
    s.reserve_many([(1, job("one", app="web", max_instances_per_node=1), ())])
    assert MaxInstancesFilter().mask(job("three", app="web", max_instances_per_node=3), s).tolist() == [True, False]
