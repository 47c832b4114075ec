import numpy as np
from sched_builders import job, node, snap

from scheduling.policies import get_policy


def test_order_is_submit_time_then_id():
    p = get_policy("fifo-first-fit")
    jobs = [job("c", submit_time=2.0), job("b", submit_time=1.0), job("a", submit_time=2.0)]
    assert [j.job_id for j in p.order(jobs, now=10.0)] == ["b", "a", "c"]


def test_score_prefers_lowest_index():
    s = snap(node("a"), node("b"), node("c"), node("d"))
    scores = get_policy("fifo-first-fit").score(job(), s, np.ones(4, dtype=bool))
    assert scores.shape == (4,)
    assert list(np.argsort(-scores)) == [0, 1, 2, 3]
