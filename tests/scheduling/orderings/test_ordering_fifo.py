from sched_builders import job

from scheduling.orderings import get_ordering

FIFO = get_ordering("fifo")


def ids(jobs):
    return [j.job_id for j in jobs]


def test_submit_time_then_job_id():
    jobs = [job("c", submit_time=2.0), job("b", submit_time=1.0), job("a", submit_time=2.0)]
    assert ids(FIFO.order(jobs, now=10.0)) == ["b", "a", "c"]


def test_input_order_does_not_matter():
    jobs = [job(f"j{i}", submit_time=float(i % 3)) for i in range(9)]
    assert FIFO.order(jobs, 0.0) == FIFO.order(list(reversed(jobs)), 0.0)


def test_empty():
    assert FIFO.order([], 0.0) == []
