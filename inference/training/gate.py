"""The promotion rules: pure functions of the two held-out evaluations and the latency budget.

A candidate is promoted only if

1. it **loads** (a model that does not load would serve the heuristic fallback);
2. its held-out **allocation** is higher than the serving version's (no serving version, or one
   that does not load: nothing to beat — a version that serves the heuristic fallback is replaced
   by any that loads). With both evaluations' per-seed values on the same seeds, the gain is
   paired seed by seed and must be more than twice its standard error (:data:`MIN_T`): a gain on
   one seed of five, where the two models placed one pod differently, is noise, and a new version
   serving for it is churn (a scratch promotion once swapped a model for +0.004 pp: 0.016 pp on
   seed 101, the same to the digit on the other four). A gain the same on every seed passes.
   Without per-seed values, strictly higher;
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

import math
from collections.abc import Sequence
from typing import Any

DEFAULT_LATENCY_BUDGET_MS = 100.0
MIN_T = 2.0  # the paired gain over the seeds must be more than this many standard errors
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
                    serving_error: str | None = None, gains: Sequence[float] | None = None) -> tuple[bool, str]:  # fmt: skip
    """``(allowed, what the rule saw)``: better than the serving version's held-out fill (``serving``
    None: there is none, or it does not load — ``serving_error`` says why); ``gains``: candidate minus
    serving per seed (module docstring), else strictly higher."""
    if serving is None:
        if serving_version is None:
            return True, "first version"
        return True, f"the serving version {serving_version} may not serve ({serving_error})"
    if gains is not None and len(gains) >= 2:
        n, mean = len(gains), sum(gains) / len(gains)
        se = math.sqrt(sum((g - mean) ** 2 for g in gains) / (n - 1) / n)
        saw = (f"held-out fill {candidate:.3f} % against serving {serving_version} {serving:.3f} %: {mean:+.3f} pp "
               f"over {n} seeds, standard error {se:.3f} pp")  # fmt: skip
        if mean > 0 and mean > MIN_T * se:
            return True, saw
        return False, f"allocation: not better than serving {serving_version} beyond noise: {saw}"
    if candidate > serving:
        return True, f"held-out fill {candidate:.3f} % > serving {serving_version} {serving:.3f} %"
    return False, f"allocation: not better than serving {serving_version}: held-out fill {candidate:.3f} % <= {serving:.3f} %"


def paired_gains(candidate: dict[str, Any], serving: dict[str, Any]) -> list[float] | None:
    """Candidate minus serving held-out fill per seed, when both evaluated the same seeds (else None)."""
    mine = {s["seed"]: s["allocated_pct_at_100"] for s in candidate.get("per_seed") or []}
    theirs = {s["seed"]: s["allocated_pct_at_100"] for s in serving.get("per_seed") or []}
    if not mine or set(mine) != set(theirs):
        return None
    return [float(mine[s]) - float(theirs[s]) for s in sorted(mine)]


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
    gains = paired_gains(candidate, serving) if loads else None  # type: ignore[arg-type]
    allocation = allocation_rule(float(candidate["score"]), serving_score, serving_version, error, gains)
    refused = [] if allocation[0] else [allocation[1]]
    if refused and loads:
        note = over_budget_note(serving, serving_version, latency_budget_ms)  # type: ignore[arg-type]
        refused += [note] if note else []
    latency = latency_rule(p99_of(candidate), latency_budget_ms)
    refused += [] if latency[0] else [latency[1]]
    if refused:
        return "rejected", "; ".join(refused)
    return "promoted", f"{allocation[1]}; {latency[1]}"
