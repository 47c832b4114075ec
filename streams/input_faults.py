"""Fault injection for the worker's consumption: records to lose once, as Faust can.

``SEMSCHED_FAULT_DROP_INPUT=jobs.submitted:7,jobs.submitted:19`` makes the worker's agent for
that topic let the record at that offset (on any partition) go unhandled the first time it
arrives, before the offset watch sees it: the same as Faust dropping a fetched record
(:mod:`streams.offset_watch`). The integration test of the offset watch uses it; it has no
other use. Empty (the default): nothing is lost.
"""

from __future__ import annotations

import os

ENV = "SEMSCHED_FAULT_DROP_INPUT"


class InputFaults:
    def __init__(self, spec: str = "") -> None:
        self._pending: set[tuple[str, int]] = set()
        for item in filter(None, (x.strip() for x in spec.split(","))):
            topic, _, offset = item.rpartition(":")
            if not topic or not offset.isdigit():
                raise ValueError(f"{ENV}: {item!r} is not TOPIC:OFFSET (e.g. jobs.submitted:7)")
            self._pending.add((topic, int(offset)))
        self.dropped = 0

    @classmethod
    def from_env(cls) -> InputFaults:
        return cls(os.environ.get(ENV, ""))

    def drop(self, topic: str, offset: int) -> bool:
        """True the first time the record at ``offset`` of ``topic`` (un-prefixed) arrives."""
        if (topic, offset) not in self._pending:
            return False
        self._pending.discard((topic, offset))
        self.dropped += 1
        return True
