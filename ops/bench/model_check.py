"""Which model a benchmark's learned policies place with, or why they cannot.

A benchmark never reports the fallback heuristic's numbers under the learned policy's name:
``semsched bench fill|trace|sweep|step`` refuse, before running anything, a learned policy
named on the command line whose model does not load, and name the version that does in the
report; their default list (every registered placement) leaves the learned ones out then, and
says so (``ops/cli/bench.py``).
"""

from __future__ import annotations

from collections.abc import Sequence


def learned_version(policies: Sequence[str]) -> tuple[str | None, str | None]:
    """``(model version, None)`` when a policy places with the learned model and its model
    loads; ``(None, why)`` when it does not load; ``(None, None)`` when no policy is learned."""
    from inference.policy import LearnedPolicy, uses_learned

    if not any(uses_learned(p) for p in policies):
        return None, None

    probe = LearnedPolicy()
    if probe.fell_back:
        return None, (f"the learned policy has no model at {probe.model_dir} ({probe.fallback_reason}); "
                      "train one (semsched train) or point SEMSCHED_MODEL_DIR (bench sweep: --model) at one")  # fmt: skip
    return probe.model_version, None

