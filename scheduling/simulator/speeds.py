"""Node-speed heterogeneity: a seeded speed factor per node.

The sweep's levels (the seed paper's): Low ±5 %, Medium ±15 %, High ±30–50 % (we use
±40 %), Extreme ≥ 50 % (we use ±60 %). A job of trace duration ``d`` runs ``d / speed``
on a node; the heuristics do not see speeds (that is what the sweep measures).
"""

from __future__ import annotations

import numpy as np

HETEROGENEITY_LEVELS: dict[str, float] = {"none": 0.0, "low": 0.05, "medium": 0.15, "high": 0.40, "extreme": 0.60}


def node_speeds(num_nodes: int, spread: float, seed: int) -> np.ndarray:
    """Speeds uniform in ``[1 − spread, 1 + spread]``; all 1.0 without spread."""
    if spread <= 0:
        return np.ones(num_nodes)
    rng = np.random.default_rng([seed, 7919])
    return rng.uniform(1.0 - spread, 1.0 + spread, num_nodes)
