"""What the worker's duration estimate learned from: the latest finished jobs it was taught.

The worker teaches its duration estimate (``Worker.durations``) the archive's latest finished jobs
at start (:mod:`streams.duration_warm_up`) and then each job it sees finish
(:meth:`streams.app.Worker.observe_finished`). When the policy orders by a duration model, both
are also written here, the latest 20,000 of them (or ``SEMSCHED_DURATION_WARM_UP``, when larger),
so that a new version of the duration model, picked up without a restart
(:mod:`streams.duration_reload`), is taught the same jobs: it would otherwise forget everything
that finished since its training, as a restart did before the warm-up.
"""

from __future__ import annotations

from collections import deque

from storage.queries.finished_jobs import FinishedJob


class FinishedLog:
    """The latest ``keep`` finished jobs, oldest first; ``added`` counts every one ever written
    (a mark: :meth:`since` returns what was written after it)."""

    def __init__(self, keep: int) -> None:
        self.rows: deque[FinishedJob] = deque(maxlen=max(0, keep))
        self.added = 0

    def add(self, rows: list[FinishedJob]) -> None:
        self.rows.extend(rows)
        self.added += len(rows)

    def latest(self) -> list[FinishedJob]:
        return list(self.rows)

    def since(self, mark: int) -> list[FinishedJob]:
        """The rows written after ``added`` was ``mark`` (those still kept)."""
        n = min(self.added - mark, len(self.rows))
        return list(self.rows)[len(self.rows) - n :] if n > 0 else []

    def __len__(self) -> int:
        return len(self.rows)
