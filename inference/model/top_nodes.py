"""Each job's ``k`` best-scored nodes, where the cost estimator ψ is evaluated (``run_policy``).

``scores.topk(k, dim=1)`` over ``[J, N]`` costs ~0.6 ms at 256 pending × 1,213 nodes on one CPU
thread: torch's CPU top-k is a partial sort per row, ~2 µs a row of 1,213. :func:`top_nodes` finds
the same ``k`` values with a cheap pass first: the columns are dealt into ``groups`` strided groups
of ``span`` columns each (column ``i · groups + g`` in group ``g``), one ``amax`` gives each group's
best, and only the ``k`` groups with the best maxima — plus the few columns past the last full
stride — can hold a row's ``k`` best (a column outside them is beaten by at least ``k`` group
maxima, one per group). Top-k then runs over those ``k · span + tail`` candidates (~70 at 1,213
nodes). The result holds the same values as ``topk``'s (a test); among tied values it may name
other columns, as ``topk`` itself promises no order among ties.
"""

from __future__ import annotations

import torch

SPAN = 8  # columns per group: the candidates are k · SPAN plus the fewer than SPAN columns past the last group


def top_nodes(scores: torch.Tensor, k: int, span: int = SPAN) -> torch.Tensor:
    """int64 ``[J, k]``: the columns of each row's ``k`` largest ``scores [J, N]`` (``k <= N``), in
    descending order of score."""
    j, n = scores.shape
    groups = n // span
    if groups <= 2 * k:  # few columns: top-k over them all is as cheap
        return scores.topk(k, dim=1).indices
    main = groups * span  # columns [main, n) (fewer than `span`) are candidates of every row
    best = scores[:, :main].reshape(j, span, groups).amax(dim=1)  # [J, groups]
    picked = best.topk(k, dim=1).indices  # [J, k]
    columns = (picked[:, :, None] + groups * torch.arange(span, device=scores.device)).reshape(j, k * span)
    if main < n:
        columns = torch.cat([columns, torch.arange(main, n, device=scores.device).expand(j, -1)], dim=1)
    return columns.gather(1, scores.gather(1, columns).topk(k, dim=1).indices)
