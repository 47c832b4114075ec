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
