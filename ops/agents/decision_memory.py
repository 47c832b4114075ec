"""What the simulated agents remember of the decisions they were sent, and for how long.

- ``executed``: every decision whose command they carried out (or refused, with a report): a command
  of one of these read again (a redelivery, the worker sending it once more) is not executed twice.
- ``fenced``: placements preempted before their command came (the reason): when it comes, it is
  reported preempted, not run.

Both used to grow with every command for the life of the process. A decision is forgotten once it has
been over (its run ended, or there was nothing to run) for ``SEMSCHED_DONE_RETENTION`` plus the clock
skew, and a fence once it has waited that long: by then the worker has forgotten the job
(streams/done_retention.py) and sends none of its commands, and the topics' retention (7 days, as the
setting's default) has deleted them. A running placement's decision is kept however long it runs.
``SEMSCHED_DONE_RETENTION=0`` keeps them for ever, as the worker does its done jobs.
"""

from __future__ import annotations

from collections import deque

Key = tuple[str, str]  # (cluster, decision id)


class DecisionMemory:
    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s  # 0: for ever
        self.executed: set[Key] = set()
        self.fenced: dict[Key, str] = {}
        self._over: deque[tuple[float, Key]] = deque()  # (since when, decision), oldest first
        self._fences_at: deque[tuple[float, Key]] = deque()

    def __contains__(self, decision: Key) -> bool:
        return decision in self.executed

    def execute(self, decision: Key) -> None:
        self.executed.add(decision)

    def over(self, decision: Key, now: float) -> None:
        """``decision``'s run ended, or it had none (a preemption, an isolation): forgotten in time."""
        self._over.append((now, decision))

    def fence(self, decision: Key, reason: str, now: float) -> None:
        self.fenced[decision] = reason
        self._fences_at.append((now, decision))

    def take_fence(self, decision: Key) -> str | None:
        """The reason ``decision`` was preempted before it came, once; None when it was not."""
        return self.fenced.pop(decision, None)

    def forget_old(self, now: float) -> int:
        """Forget what has been over or waiting longer than ``keep_s``; how many were forgotten."""
        if self.keep_s <= 0:
            return 0
        horizon = now - self.keep_s
        n = 0
        while self._over and self._over[0][0] < horizon:
            self.executed.discard(self._over.popleft()[1])
            n += 1
        while self._fences_at and self._fences_at[0][0] < horizon:
            n += self.fenced.pop(self._fences_at.popleft()[1], None) is not None
        return n
