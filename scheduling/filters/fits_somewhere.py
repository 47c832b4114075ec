"""Which jobs can be placed now: the default filters let them onto some node of the cluster.

Within one scheduling step free capacity only shrinks and an app's instances per node only
grow (releases come between steps), so a job that fits nowhere at some point of the step is
turned away for the rest of it. A placement that looks ahead along the step's order (a
model-backed one's calls and rollouts) asks this instead of taking the next jobs of the order,
most of which fit nowhere behind a saturated cluster.

The filters run once per :func:`~scheduling.filters.framework.filter_shape` (all they read),
as :func:`scheduling.assign.schedule_step` runs them: a shape found to fit nowhere is not asked
again for the rest of the step; a shape that fits is asked again on the next call, whose
cluster may have filled up.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.filters.framework import filter_shape, run_filters
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


class FitsSomewhere:
    """One step's answers (a new one per step: capacity comes back between steps)."""

    def __init__(self) -> None:
        self._nowhere: set[tuple] = set()  # shapes that fit on no node at some point of the step

    def first(self, jobs: Iterable[JobRequest], snapshot: ClusterSnapshot, most: int) -> list[JobRequest]:
        """Up to ``most`` of ``jobs``, in their order, that the default filters let onto some node
        of ``snapshot`` as it is now; ``jobs`` is read no further than the ``most``-th of them."""
        fits: set[tuple] = set()  # shapes that fit on this snapshot (it does not change within the call)
        out: list[JobRequest] = []
        if most < 1:
            return out
        for job in jobs:
            key = filter_shape(job)
            if key in self._nowhere:
                continue
            if key not in fits:
                if not run_filters(job, snapshot, explain=False).feasible_mask.any():
                    self._nowhere.add(key)
                    continue
                fits.add(key)
            out.append(job)
            if len(out) == most:
                break
        return out
