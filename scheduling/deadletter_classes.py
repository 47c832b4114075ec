"""A dead letter's class: a few words for its human-readable reason, one definition for the worker's
``semsched.deadletters`` counter (``reason_class``) and the dashboards' dead-letter panel, which read
the reasons from the archive. A reason names ids (``job id 'x' was already submitted (event y)``):
grouped by its text, every message was a series of its own (found by review: 50 duplicate jobs, 52
series)."""

from __future__ import annotations

from scheduling.events import INTERNAL_ERROR

#: (reason prefix, lower case; class), first match wins; anything else is ``other``
CLASSES: tuple[tuple[str, str], ...] = (
    ("invalid", "invalid"), ("message of", "oversized"), ("not utf-8", "not_utf8"), ("empty", "empty"),
    ("event of cluster", "wrong_partition"), (INTERNAL_ERROR, "internal_error"), ("job id", "duplicate"),
    ("started report of", "bad_report"),
)  # fmt: skip


def reason_class(reason: str) -> str:
    """The class of a dead letter's ``reason``."""
    r = reason.strip().lower()
    for prefix, cls in CLASSES:
        if r.startswith(prefix):
            return cls
    return "other"


def reason_class_sql(column: str = "reason") -> str:
    """:func:`reason_class` as a ClickHouse expression over the text ``column``."""
    r = f"lower(trimBoth({column}))"
    branches = ", ".join(f"startsWith({r}, '{prefix}'), '{cls}'" for prefix, cls in CLASSES)
    return f"multiIf({branches}, 'other')"
