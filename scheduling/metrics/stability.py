"""Scheduling stability, two numbers (ARCHITECTURE.md asks us to document the definition):

- **Placement stability** = the share of placements that were not later reversed — by a
  preemption, a migration, a failure that re-queued the job, or a placement that was never
  confirmed and timed out. 1.0 means no placement was ever taken back.
  ``placement_stability(placements, reversals)``.
- **Order agreement** = how much successive scheduling steps agree on the order of the
  jobs that are still pending in both: for each pair of consecutive steps, the share of
  concordant pairs among the jobs pending in both (the first ``head`` of the queue, to
  bound the cost), averaged over step pairs. 1.0 means the queue order never reshuffles
  (FIFO); priorities that change with time (LAS, DRF) score lower. Pairs of steps with
  fewer than two common jobs are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def placement_stability(placements: int, reversals: int) -> float | None:
    if placements <= 0:
        return None
    return 1.0 - min(reversals, placements) / placements


def order_agreement(orders: Sequence[Sequence[str]], head: int = 200) -> float | None:
    """Mean concordant-pair share between consecutive queue orders (see the module doc)."""
    scores: list[float] = []
    for prev, cur in zip(orders, orders[1:], strict=False):
        prev_rank = {j: i for i, j in enumerate(prev[:head])}
        common = [j for j in cur[:head] if j in prev_rank]
        if len(common) < 2:
            continue
        ranks = np.array([prev_rank[j] for j in common])  # in the current order
        upper = np.triu_indices(len(ranks), k=1)
        concordant = ranks[upper[0]] < ranks[upper[1]]
        scores.append(float(concordant.mean()))
    return float(np.mean(scores)) if scores else None
