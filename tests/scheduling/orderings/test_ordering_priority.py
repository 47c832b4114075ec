import pytest
from sched_builders import job

from scheduling.orderings import get_ordering

PRIO = get_ordering("priority")


def ids(jobs):
    return [j.job_id for j in jobs]


def test_qos_classes_in_documented_order():
    jobs = [job("be", qos="BE"), job("burst", qos="Burstable"), job("guar", qos="Guaranteed"), job("ls", qos="LS")]
    assert ids(PRIO.order(jobs, 0.0)) == ["ls", "guar", "burst", "be"]


def test_qos_beats_priority_and_higher_priority_first_within_a_class():
    jobs = [job("be-hi", qos="BE", priority=100), job("ls-lo", qos="LS", priority=-5),
            job("ls-hi", qos="LS", priority=9), job("be-lo", qos="BE", priority=0)]  # fmt: skip
    assert ids(PRIO.order(jobs, 0.0)) == ["ls-hi", "ls-lo", "be-hi", "be-lo"]


def test_fifo_breaks_ties():
    jobs = [job("b", priority=1, submit_time=3.0), job("c", priority=1, submit_time=1.0), job("a", priority=1,
                                                                                              submit_time=3.0)]
    assert ids(PRIO.order(jobs, 0.0)) == ["c", "a", "b"]


def test_custom_qos_order_and_unknown_class_last():
    prio = get_ordering("priority", qos_order=("BE", "LS"))
    jobs = [job("ls", qos="LS"), job("guar", qos="Guaranteed"), job("be", qos="BE")]
    assert ids(prio.order(jobs, 0.0)) == ["be", "ls", "guar"]
    with pytest.raises(ValueError):
        get_ordering("priority", qos_order=("LS", "LS"))


def test_a_gang_ranks_by_its_most_urgent_member_not_a_mix_of_two():
    """Found by review: the gang's key took the best QoS of one member and the highest priority of another,
    so a gang of (LS, 0) and (BE, 10) went ahead of a single job (LS, 5) submitted before it."""
    jobs = [job("s", qos="LS", priority=5, submit_time=0.0),
            job("g1", qos="LS", priority=0, gang_id="g", gang_size=2, submit_time=1.0),
            job("g2", qos="BE", priority=10, gang_id="g", gang_size=2, submit_time=1.0)]  # fmt: skip
    assert ids(PRIO.order(jobs, 0.0)) == ["s", "g1", "g2"]
