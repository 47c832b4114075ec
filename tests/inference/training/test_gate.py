"""The promotion rules (inference/training/gate.py) with numbers: allocation strictly better (even
than a serving version over the latency budget), p99 model step within the budget, and a reason
that names the rule that refused."""

from __future__ import annotations

from inference.training.gate import BY_HAND, allocation_rule, decide, latency_rule


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


def test_a_serving_version_over_the_budget_is_replaced_only_by_a_better_one() -> None:
    # the fragmentation model (302 ms) serves; a lean one (46 ms) with 0.5 pp less fill does not beat it:
    # refused, and the reason says the serving version is over the budget and how to serve the lean one anyway
    status, reason = decide(_eval(94.7, p99=46.0), _eval(95.2, p99=302.0), "frag")
    assert status == "rejected"
    assert reason == ("allocation: not better than serving frag: held-out fill 94.700 % <= 95.200 %; "
                      "the serving version frag is over the latency budget (p99 model step 302.0 ms > 100 ms), "
                      f"but the candidate does not beat it: {BY_HAND}")  # fmt: skip
    # what happened once: 94.91 % replaced 95.23 % because the serving version was over the budget
    assert decide(_eval(94.91, p99=19.6), _eval(95.23, p99=739.0), "frag")[0] == "rejected"
    # an equal one does not beat it either
    assert decide(_eval(95.2, p99=46.0), _eval(95.2, p99=302.0), "frag")[0] == "rejected"
    # a better one within the budget replaces it, and its reason is the two rules' (no over-budget note)
    status, reason = decide(_eval(95.3, p99=46.0), _eval(95.2, p99=302.0), "frag")
    assert (status, reason) == ("promoted", "held-out fill 95.300 % > serving frag 95.200 %; "
                                            "p99 model step 46.0 ms <= budget 100 ms")  # fmt: skip
    # a better one over the budget too is refused by the latency rule alone
    status, reason = decide(_eval(95.3, p99=150.0), _eval(95.2, p99=302.0), "frag")
    assert (status, reason) == ("rejected", "latency: p99 model step 150.0 ms > budget 100 ms")
    # worse and over the budget: every rule that refused is named, the note beside allocation's
    status, reason = decide(_eval(94.7, p99=150.0), _eval(95.2, p99=302.0), "frag")
    assert status == "rejected" and reason.startswith("allocation:") and "over the latency budget" in reason
    assert reason.endswith("; latency: p99 model step 150.0 ms > budget 100 ms")
    # no budget, a serving version within it or not measured: no over-budget note
    assert "over the latency budget" not in decide(_eval(94.7, p99=46.0), _eval(95.2, p99=302.0), "frag",
                                                   latency_budget_ms=None)[1]  # fmt: skip
    assert "over the latency budget" not in decide(_eval(94.7, p99=46.0), _eval(95.2, p99=60.0), "frag")[1]
    assert "over the latency budget" not in decide(_eval(94.7, p99=46.0), _eval(95.2, p99=None), "frag")[1]


def test_decide_first_version_broken_serving_and_broken_candidate() -> None:
    assert decide(_eval(90.0), None, None)[0] == "promoted"
    assert decide(_eval(90.0, p99=150.0), None, None) == ("rejected", "latency: p99 model step 150.0 ms > budget "
                                                                      "100 ms")  # fmt: skip
    assert decide(_eval(90.0, p99=None), None, None)[0] == "rejected"  # not measured: not promoted
    status, reason = decide(_eval(90.0), _eval(99.0, loaded=False), "old")
    assert status == "promoted" and reason.startswith("the serving version old may not serve (bad weights)")
    status, reason = decide(_eval(0.0, loaded=False), _eval(50.0), "old")
    assert status == "rejected" and reason == "the candidate does not load: bad weights"


def _seeds(*values: float) -> dict[str, object]:
    e = _eval(sum(values) / len(values))
    return e | {"per_seed": [{"seed": 100 + i, "allocated_pct_at_100": v} for i, v in enumerate(values)]}


def test_a_gain_within_the_seeds_noise_does_not_promote() -> None:
    """Paired by seed: what a scratch promotion once did (+0.016 pp on one seed of five, the rest the same
    to the digit: +0.004 pp) is refused; a gain on every seed, however small, or a large mean one passes."""
    serving = _seeds(95.062, 95.257, 95.113, 95.458, 95.254)
    status, reason = decide(_seeds(95.062, 95.273, 95.113, 95.458, 95.254), serving, "fgd-s0")
    assert status == "rejected" and reason == ("allocation: not better than serving fgd-s0 beyond noise: held-out fill "
                                               "95.232 % against serving fgd-s0 95.229 %: +0.003 pp over 5 seeds, "
                                               "standard error 0.003 pp")  # fmt: skip
    assert decide(_seeds(95.072, 95.267, 95.123, 95.468, 95.264), serving, "fgd-s0")[0] == "promoted"  # +0.01 each
    assert decide(_seeds(95.3, 95.6, 95.1, 95.8, 95.5), serving, "fgd-s0")[0] == "promoted"
    assert decide(_seeds(95.0, 95.2, 95.1, 95.4, 95.2), serving, "fgd-s0")[0] == "rejected"  # worse
    other_seeds = _eval(95.3) | {"per_seed": [{"seed": 7, "allocated_pct_at_100": 95.3}]}
    assert decide(other_seeds, serving, "fgd-s0")[0] == "promoted"  # not the same seeds: the means, strictly
