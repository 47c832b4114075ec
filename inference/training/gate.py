"""The promotion rules: pure functions of the two held-out evaluations and the latency budget.

A candidate is promoted only if

1. it **loads** (a model that does not load would serve the heuristic fallback);
2. its held-out **allocation** is strictly higher than the serving version's (no serving
   version, or one that does not load: nothing to beat — a version that serves the heuristic
   fallback is replaced by any that loads);
3. its **model-step latency** (p99 of one step's model call — inputs and one model call — at
   256 pending openb pods on the loaded openb cluster,
   :mod:`inference.training.step_latency`) is within the budget (``None``: no budget).

Rules 2 and 3 are both checked; the reason of a refusal names every rule that refused
(``allocation: …``, ``latency: …``), the reason of a promotion what each rule saw.

A serving version over the latency budget is no exception to rule 2 (the issue: "promoted
only if it beats the serving version"): a faster candidate with a lower held-out allocation
is refused, and the reason says that the serving version is over the budget and how to
replace it by hand (:data:`BY_HAND`) — trading allocation for latency is an operator's call,
not the gate's.
"""

from __future__ import annotations

from typing import Any

DEFAULT_LATENCY_BUDGET_MS = 100.0
# how to serve a version the gate refused (``semsched models promote`` applies these same rules)
BY_HAND = "to serve it anyway, point <models>/latest at it by hand"


def latency_rule(p99_ms: float | None, budget_ms: float | None) -> tuple[bool, str]:
    """``(allowed, what the rule saw)`` for a candidate whose p99 model step took ``p99_ms``."""
    if budget_ms is None:
        return True, "no latency budget" if p99_ms is None else f"p99 model step {p99_ms:.1f} ms (no budget)"
    if p99_ms is None:
        return False, f"latency: the model step was not measured (budget {budget_ms:g} ms)"
    if p99_ms > budget_ms:
        return False, f"latency: p99 model step {p99_ms:.1f} ms > budget {budget_ms:g} ms"
    return True, f"p99 model step {p99_ms:.1f} ms <= budget {budget_ms:g} ms"


def allocation_rule(candidate: float, serving: float | None, serving_version: str | None,
                    serving_error: str | None = None) -> tuple[bool, str]:  # fmt: skip
    """``(allowed, what the rule saw)``: strictly better than the serving version's held-out fill
    (``serving`` None: there is none, or it does not load — ``serving_error`` says why)."""
    if serving is None:
        if serving_version is None:
            return True, "first version"
        return True, f"the serving version {serving_version} may not serve ({serving_error})"
    if candidate > serving:
        return True, f"held-out fill {candidate:.3f} % > serving {serving_version} {serving:.3f} %"
    return False, f"allocation: not better than serving {serving_version}: held-out fill {candidate:.3f} % <= {serving:.3f} %"


def over_budget_note(serving: dict[str, Any], serving_version: str | None, budget_ms: float | None) -> str | None:
    """What to add to an allocation refusal when the serving version itself is over the budget
    (None: it is within it, unmeasured, or there is no budget)."""
    p99 = p99_of(serving)
    if budget_ms is None or p99 is None or p99 <= budget_ms:
        return None
    return (f"the serving version {serving_version} is over the latency budget (p99 model step {p99:.1f} ms > "
            f"{budget_ms:g} ms), but the candidate does not beat it: {BY_HAND}")


def p99_of(evaluation: dict[str, Any]) -> float | None:
    """The p99 model-step latency (ms) an evaluation measured, or None."""
    latency = evaluation.get("latency") or {}
    p99 = latency.get("p99_ms")
    return None if p99 is None else float(p99)


def decide(candidate: dict[str, Any], serving: dict[str, Any] | None, serving_version: str | None,
           latency_budget_ms: float | None = DEFAULT_LATENCY_BUDGET_MS) -> tuple[str, str]:  # fmt: skip
    """``(status, reason)`` from the held-out evaluations (:func:`inference.training.heldout.evaluate_held_out`)."""
    if not candidate.get("loaded"):
        return "rejected", f"the candidate does not load: {candidate.get('error')}"
    loads = serving is not None and bool(serving.get("loaded"))
    serving_score = float(serving["score"]) if loads else None  # type: ignore[index]
    error = None if serving is None or loads else str(serving.get("error"))
    allocation = allocation_rule(float(candidate["score"]), serving_score, serving_version, error)
    refused = [] if allocation[0] else [allocation[1]]
    if refused and loads:
        note = over_budget_note(serving, serving_version, latency_budget_ms)  # type: ignore[arg-type]
        refused += [note] if note else []
    latency = latency_rule(p99_of(candidate), latency_budget_ms)
    refused += [] if latency[0] else [latency[1]]
    if refused:
        return "rejected", "; ".join(refused)
    return "promoted", f"{allocation[1]}; {latency[1]}"
