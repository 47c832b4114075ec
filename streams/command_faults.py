"""Fault injection for the worker's placement commands: commands that never leave the worker.

``SEMSCHED_FAULT_LOSE_COMMANDS=20`` lets the first 20 placement commands through and loses every
later one (answered as delivered, never sent): their decisions are applied, their jobs reserved, and
no agent hears of them. Killed then, the worker is one that died between applying a step's decisions
and sending their commands; its successor must send them (:mod:`streams.uncommanded`). The integration
test of that uses it; it has no other use. Empty (the default): nothing is lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from streams.changelog_faults import let_through

if TYPE_CHECKING:
    from streams.app import Worker

ENV = "SEMSCHED_FAULT_LOSE_COMMANDS"

log = logging.getLogger("semsched.worker")


class CommandFaults:
    def __init__(self, spec: str = "") -> None:
        self.keep = let_through(ENV, spec, "placement commands", 20)
        self.sent = 0
        self.lost = 0

    @classmethod
    def from_env(cls) -> CommandFaults:
        return cls(os.environ.get(ENV, ""))

    def install(self, w: Worker) -> None:
        """Wrap ``w.publish`` (the one path of the worker's messages to the broker)."""
        if self.keep is None:
            return
        log.warning("%s=%d: the placement commands after the first %d are lost", ENV, self.keep, self.keep)
        publish = w.publish

        async def lossy(topic: str, key: bytes | None, value: bytes, partition: int, headers: Any = None) -> Any:
            if topic != "actions" or json.loads(value).get("kind") != "place":
                return await publish(topic, key, value, partition, headers)
            if self.keep is None or self.sent < self.keep:
                self.sent += 1
                return await publish(topic, key, value, partition, headers)
            self.lost += 1
            delivered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            delivered.set_result(None)
            return delivered

        w.publish = lossy  # type: ignore[method-assign]
