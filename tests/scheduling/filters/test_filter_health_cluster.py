from sched_builders import job, node, snap

from scheduling.filters import ClusterFilter, HealthFilter


def test_unhealthy_nodes_rejected():
    s = snap(node("a"), node("b", healthy=False))
    assert HealthFilter().mask(job(), s).tolist() == [True, False]
    s.set_healthy(0, False)
    assert HealthFilter().mask(job(), s).tolist() == [False, False]
    assert HealthFilter().reason(job()) == "node(s) unhealthy"


def test_other_cluster_rejected():
    s = snap(node("a", cluster="east"), node("b", cluster="west"))
    j = job(cluster="west")
    assert ClusterFilter().mask(j, s).tolist() == [False, True]
    assert ClusterFilter().reason(j) == "node(s) not in cluster west"
