"""What a semantic encoder may read of a job: its free text without the trace's outcome labels.

:func:`scheduling.job.job_text` joins ``name | command | app | key=value …``. Some trace
loaders record how the job *ended* as a label, which would leak the answer into the features
of a model that is meant to predict or act before the outcome exists. Stripped here:

- ``pod_phase`` (openb: the pod's phase in the original cluster — Running / Pending / Failed …),
- ``lifetime`` (dlrm2025: ``complete`` / ``beyond_window`` / ``created_before_window``, derived
  from the deletion time),
- ``request_missing`` is kept (a property of the submission, not of its outcome).
"""

from __future__ import annotations

#: label keys whose value is known only after the job ran
OUTCOME_LABELS: frozenset[str] = frozenset({"pod_phase", "lifetime"})


def clean_text(text: str, outcome_labels: frozenset[str] = OUTCOME_LABELS) -> str:
    """``text`` with every ``key=value`` part whose key is an outcome label removed."""
    parts = [p.strip() for p in text.split(" | ")]
    kept = [p for p in parts if p and p.split("=", 1)[0] not in outcome_labels]
    return " | ".join(kept)
