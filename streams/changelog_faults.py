"""Fault injection for the worker's table changelogs: writes that never reach the broker.

``SEMSCHED_FAULT_LOSE_CHANGELOG=200`` lets the first 200 changelog writes of the job tables
(``pending``, ``running``, ``done``) through, and loses every later one: the tables in memory
go on, the input offsets are committed, the changelogs fall behind. Killed then, the worker is
one whose writes were still in flight when it died (Faust commits an event's offset without
waiting for the writes it caused), and its successor recovers tables that lack them
(:mod:`streams.log_restore` brings them back). The integration test of the restore uses it; it
has no other use. Empty (the default): nothing is lost.
"""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace
from typing import Any

ENV = "SEMSCHED_FAULT_LOSE_CHANGELOG"

log = logging.getLogger("semsched.worker")


def let_through(env: str, spec: str, what: str, example: int) -> int | None:
    """A fault variable's value: how many ``what`` to let through before losing the rest (None: empty,
    lose nothing); anything else is refused by the variable's name (the command faults read theirs so too)."""
    spec = spec.strip()
    if spec and not spec.isdigit():
        raise ValueError(f"{env}: {spec!r} is not a number of {what} to let through (e.g. {example})")
    return int(spec) if spec else None


class ChangelogFaults:
    def __init__(self, spec: str = "") -> None:
        self.keep = let_through(ENV, spec, "writes", 200)
        self.sent = 0
        self.lost = 0

    @classmethod
    def from_env(cls) -> ChangelogFaults:
        return cls(os.environ.get(ENV, ""))

    def install(self, tables: list[Any]) -> None:
        """Wrap each table's ``send_changelog`` (the one path of Faust's table writes to the broker)."""
        if self.keep is None:
            return
        log.warning("%s=%d: the job tables' changelog writes after the first %d are lost", ENV, self.keep, self.keep)
        for table in tables:
            table.send_changelog = self._lossy(table.send_changelog)

    def _lossy(self, send: Any) -> Any:
        def send_changelog(partition: int | None, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            if self.keep is None or self.sent < self.keep:
                self.sent += 1
                return send(partition, key, value, *args, **kwargs)
            self.lost += 1
            # what Faust reads of the returned future: the partition the write went to
            return SimpleNamespace(message=SimpleNamespace(partition=partition if partition is not None else 0))

        return send_changelog
