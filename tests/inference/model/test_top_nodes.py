"""Each job's best-scored nodes (inference.model.top_nodes): the same values as torch's top-k."""

from __future__ import annotations

import pytest
import torch

from inference.model.top_nodes import top_nodes


@pytest.mark.parametrize("n", [5, 40, 1213, 1216])  # below the grouping, a tail of 5 columns, none
def test_top_nodes_are_topk_values_in_order_with_ties_and_infinities(n):
    g = torch.Generator().manual_seed(n)
    scores = torch.randn(64, n, generator=g).round(decimals=1)  # many ties
    scores[torch.rand(64, n, generator=g) < 0.8] = float("-inf")  # most pairs do not fit
    scores[0] = float("-inf")  # a job that fits nowhere
    scores[1, -1] = 99.0  # the best node among the last columns (past the last full group)
    scores[2, : n // 2] = 7.0  # one value everywhere in half the row
    k = min(8, n)
    got = top_nodes(scores, k)
    assert got.shape == (64, k) and got.dtype == torch.int64
    assert ((got >= 0) & (got < n)).all()
    assert all(len(set(row.tolist())) == k for row in got)  # k distinct nodes per job
    torch.testing.assert_close(scores.gather(1, got), scores.topk(k, dim=1).values)  # same values, same order
    assert got[1, 0] == n - 1
