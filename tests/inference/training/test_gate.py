"""The promotion rules (inference/training/gate.py) with numbers: allocation strictly better,
p99 model step within the budget, and a reason that names the rule that refused."""

from __future__ import annotations

from inference.training.gate import allocation_rule, decide, latency_rule


def _eval(score: float, p99: float | None = 20.0, loaded: bool = True) -> dict[str, object]:
    return {"loaded": loaded, "score": score, "latency": None if p99 is None else {"p50_ms": p99 / 2, "p99_ms": p99},
            "error": None if loaded else "bad weights"}  # fmt: skip


def test_latency_rule() -> None:
    assert latency_rule(46.0, 100.0) == (True, "p99 model step 46.0 ms <= budget 100 ms")
    assert latency_rule(100.0, 100.0)[0]  # the budget itself is within it
    assert latency_rule(302.4, 100.0) == (False, "latency: p99 model step 302.4 ms > budget 100 ms")
    assert latency_rule(None, 100.0) == (False, "latency: the model step was not measured (budget 100 ms)")
    assert latency_rule(302.4, None)[0] and latency_rule(None, None)[0]  # no budget: no rule


def test_allocation_rule() -> None:
    assert allocation_rule(95.1, 94.6, "lean") == (True, "held-out fill 95.100 % > serving lean 94.600 %")
    ok, why = allocation_rule(94.6, 94.6, "lean")
    assert not ok and why.startswith("allocation: not better than serving lean")
    assert allocation_rule(10.0, None, None) == (True, "first version")
    assert allocation_rule(10.0, None, "old", "no model.pt") == (True, "the serving version old may not serve "
                                                                      "(no model.pt)")  # fmt: skip


def test_decide_names_the_rule_that_refused() -> None:
    # the case: the slowest model allocates 0.5 pp more than the lean one
    status, reason = decide(_eval(95.6, p99=302.0), _eval(95.1, p99=46.0), "lean")
    assert status == "rejected" and reason == "latency: p99 model step 302.0 ms > budget 100 ms"
    status, reason = decide(_eval(95.6, p99=302.0), _eval(95.1), "lean", latency_budget_ms=None)
    assert status == "promoted" and reason.startswith("held-out fill 95.600 % > serving lean 95.100 %")
    status, reason = decide(_eval(94.0, p99=46.0), _eval(95.1), "slow")
    assert status == "rejected" and reason.startswith("allocation:") and "latency" not in reason
    status, reason = decide(_eval(94.0, p99=302.0), _eval(95.1), "slow")
    assert status == "rejected" and reason.startswith("allocation:") and "; latency: p99" in reason
    status, reason = decide(_eval(95.6, p99=46.0), _eval(95.1), "slow")
    assert status == "promoted" and reason.endswith("p99 model step 46.0 ms <= budget 100 ms")


def test_a_serving_version_over_the_budget_is_replaced_by_one_within_it() -> None:
    # the fragmentation model (302 ms) serves; a lean one (46 ms) with 0.5 pp less fill replaces it
    status, reason = decide(_eval(94.7, p99=46.0), _eval(95.2, p99=302.0), "frag")
    assert status == "promoted"
    assert reason.startswith("the serving version frag may not serve (it is over the budget: p99 model step 302.0 ms")
    # but not one that is over the budget too, and without a budget allocation decides again
    assert decide(_eval(94.7, p99=150.0), _eval(95.2, p99=302.0), "frag")[0] == "rejected"
    assert decide(_eval(94.7, p99=46.0), _eval(95.2, p99=302.0), "frag", latency_budget_ms=None)[0] == "rejected"
    # an old serving evaluation without a latency measurement keeps its place on allocation
    assert decide(_eval(94.7, p99=46.0), _eval(95.2, p99=None), "frag")[0] == "rejected"


def test_decide_first_version_broken_serving_and_broken_candidate() -> None:
    assert decide(_eval(90.0), None, None)[0] == "promoted"
    assert decide(_eval(90.0, p99=150.0), None, None) == ("rejected", "latency: p99 model step 150.0 ms > budget "
                                                                      "100 ms")  # fmt: skip
    assert decide(_eval(90.0, p99=None), None, None)[0] == "rejected"  # not measured: not promoted
    status, reason = decide(_eval(90.0), _eval(99.0, loaded=False), "old")
    assert status == "promoted" and reason.startswith("the serving version old may not serve (bad weights)")
    status, reason = decide(_eval(0.0, loaded=False), _eval(50.0), "old")
    assert status == "rejected" and reason == "the candidate does not load: bad weights"
