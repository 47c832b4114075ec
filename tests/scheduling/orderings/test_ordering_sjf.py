import pytest
from sched_builders import job

from scheduling.order_context import OrderContext
from scheduling.orderings import get_ordering

ORACLE = get_ordering("sjf-oracle")
PREDICTED = get_ordering("sjf-predicted")


def ids(jobs):
    return [j.job_id for j in jobs]


def test_oracle_shortest_recorded_duration_first():
    jobs = [job("long", trace_duration_s=100.0), job("short", trace_duration_s=5.0),
            job("mid", trace_duration_s=50.0)]  # fmt: skip
    assert ids(ORACLE.order(jobs, 0.0)) == ["short", "mid", "long"]


def test_oracle_ties_go_fifo_then_job_id():
    jobs = [job("b", trace_duration_s=10.0, submit_time=1.0), job("c", trace_duration_s=10.0, submit_time=0.0),
            job("a", trace_duration_s=10.0, submit_time=1.0)]  # fmt: skip
    assert ids(ORACLE.order(jobs, 0.0)) == ["c", "a", "b"]


def test_oracle_unknown_durations_last_in_fifo_order():
    jobs = [job("u2", submit_time=2.0), job("k", trace_duration_s=1e6, submit_time=5.0), job("u1", submit_time=1.0)]
    assert ids(ORACLE.order(jobs, 0.0)) == ["k", "u1", "u2"]


def test_oracle_ignores_estimates_and_predicted_ignores_trace_durations():
    jobs = [job("a", trace_duration_s=1.0, runtime_estimate_s=100.0),
            job("b", trace_duration_s=100.0, runtime_estimate_s=1.0)]  # fmt: skip
    assert ids(ORACLE.order(jobs, 0.0)) == ["a", "b"]
    assert ids(PREDICTED.order(jobs, 0.0)) == ["b", "a"]


class Table:
    """A real (if trivial) predictor: a fixed table by job id."""

    def __init__(self, table):
        self.table = table

    def predict(self, job):
        return self.table.get(job.job_id)


def test_predicted_prefers_declared_estimate_then_estimator_then_default():
    ctx = OrderContext(estimator=Table({"est": 50.0, "both": 1.0}))
    jobs = [job("both", runtime_estimate_s=500.0),  # declared 500 wins over the estimator's 1
            job("est"),                              # estimator: 50
            job("none"),                             # default 3600
            job("declared", runtime_estimate_s=10.0)]  # fmt: skip
    assert ids(PREDICTED.order(jobs, 0.0, ctx)) == ["declared", "est", "both", "none"]


def test_predicted_default_is_configurable_and_used_without_context():
    sjf = get_ordering("sjf-predicted", default_s=5.0)
    jobs = [job("x", runtime_estimate_s=10.0), job("unknown")]
    assert ids(sjf.order(jobs, 0.0)) == ["unknown", "x"]
    assert ids(PREDICTED.order(jobs, 0.0)) == ["x", "unknown"]
    with pytest.raises(ValueError):
        get_ordering("sjf-predicted", default_s=-1)


def test_predicted_ties_fifo():
    jobs = [job("b", runtime_estimate_s=7.0), job("a", runtime_estimate_s=7.0), job("c", runtime_estimate_s=7.0,
                                                                                     submit_time=-1.0)]
    assert ids(PREDICTED.order(jobs, 0.0)) == ["c", "a", "b"]
