"""What the ``running`` table holds, per cluster, kept current from its writes.

Every scheduling step needs the resources that placed jobs hold. Reading them back from the
whole table at every step (thousands of rows under load, parsed and reserved one by one)
cost the worker about a third of its time in the demo's burst. The ledger keeps them
instead: :meth:`Worker.apply <streams.app.Worker.apply>` names each ``running`` key it
writes (:meth:`touch`), and :meth:`sync` reads back only those keys. Each change goes into
its cluster's journal, which :class:`streams.snapshot_cache.SnapshotCache` drains to bring
its cluster snapshot up to date.

Writes that do not pass through ``Worker.apply`` (Faust's changelog recovery after an
assignment) are covered by :meth:`invalidate`: the next :meth:`sync` reads the whole table
again and starts a new ``epoch``, and every cluster snapshot built before it is rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from scheduling.job import JobRequest

Holding = tuple[str, JobRequest, list[int]]  # (node id, job, GPU indices)
Change = tuple[str, Holding | None]  # (job id, what it holds now; None: nothing any more)

JOURNAL_LIMIT = 50_000  # changes kept per cluster before it is rebuilt instead


def identity_of(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a ``running`` row holds where: a row with the same identity holds the same resources."""
    return row["decision_id"], row["node_id"], tuple(row["gpu_indices"]), row["job"]["cluster"]


class HeldLedger:
    def __init__(self) -> None:
        self.epoch = 0  # bumped by every full read of the table
        self._full = True
        self._dirty: set[str] = set()
        self._rows: dict[str, tuple[tuple[Any, ...], Holding]] = {}  # job id -> (identity, holding)
        self._clusters: dict[str, dict[str, Holding]] = {}
        self._journal: dict[str, list[Change]] = {}

    def touch(self, job_id: str) -> None:
        """``running[job_id]`` was written (set or deleted)."""
        self._dirty.add(job_id)

    def invalidate(self) -> None:
        """The table may have changed without :meth:`touch`: read all of it at the next :meth:`sync`."""
        self._full = True

    def sync(self, running: Mapping[str, Any], parse: Callable[[str], Holding | None]) -> None:
        """Bring the ledger up to the table: the touched keys, or every key after :meth:`invalidate`.
        ``parse(job_id)``: the holding of the row there (only called when the row's identity —
        decision, node, GPUs, cluster — changed). If reading a row fails, the error goes up and the
        next call reads the whole table again (nothing is left half read)."""
        try:
            self._sync(running, parse)
        except BaseException:
            self._full = True
            raise

    def _sync(self, running: Mapping[str, Any], parse: Callable[[str], Holding | None]) -> None:
        if self._full:
            self._full, self._dirty = False, set()
            self.epoch += 1
            rows, self._rows = self._rows, {}
            self._clusters, self._journal = {}, {}
            for job_id, d in list(running.items()):
                if d is not None:
                    kept = rows.get(job_id)
                    self._set(job_id, d, kept, parse, journal=False)
            return
        dirty, self._dirty = self._dirty, set()
        for job_id in dirty:
            d = running.get(job_id)
            kept = self._rows.get(job_id)
            if d is None:
                if kept is not None:
                    del self._rows[job_id]
                    cluster = kept[1][1].cluster
                    del self._clusters[cluster][job_id]
                    self._note(cluster, (job_id, None))
            else:
                self._set(job_id, d, kept, parse, journal=True)

    def held(self, cluster: str) -> Mapping[str, Holding]:
        """Job id → holding, for ``cluster`` (read-only; current as of the last :meth:`sync`)."""
        return self._clusters.get(cluster, {})

    def drain(self, cluster: str) -> list[Change] | None:
        """The changes of ``cluster`` since the last drain, in order; ``None`` if too many were
        kept (the caller rebuilds from :meth:`held`)."""
        changes = self._journal.pop(cluster, [])
        return None if len(changes) > JOURNAL_LIMIT else changes

    def __iter__(self) -> Iterator[Holding]:
        for rows in self._clusters.values():
            yield from rows.values()

    def __len__(self) -> int:
        return len(self._rows)

    def _set(self, job_id: str, d: dict[str, Any], kept: tuple[tuple[Any, ...], Holding] | None,
             parse: Callable[[str], Holding | None], *, journal: bool) -> None:  # fmt: skip
        identity = identity_of(d)
        if kept is not None and kept[0] == identity:  # e.g. reserved -> running: the same resources
            self._rows[job_id] = kept
            self._clusters.setdefault(kept[1][1].cluster, {})[job_id] = kept[1]
            return
        holding = parse(job_id)
        if kept is not None and (holding is None or kept[1][1].cluster != holding[1].cluster):
            self._rows.pop(job_id, None)  # (a job id re-used in another cluster)
            self._clusters.get(kept[1][1].cluster, {}).pop(job_id, None)
            if journal:
                self._note(kept[1][1].cluster, (job_id, None))
        if holding is None:
            return
        self._rows[job_id] = (identity, holding)
        self._clusters.setdefault(holding[1].cluster, {})[job_id] = holding
        if journal:
            self._note(holding[1].cluster, (job_id, holding))

    def _note(self, cluster: str, change: Change) -> None:
        changes = self._journal.setdefault(cluster, [])
        if len(changes) <= JOURNAL_LIMIT:
            changes.append(change)
