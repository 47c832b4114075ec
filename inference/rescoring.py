"""In-step re-scoring: a step's scores kept current while ``schedule_step`` places its jobs one by one.

The backend scores every (job, node) once, on the step-start state. Each placement of the
step changes one node's free capacity, so for each later job the nodes whose pair features moved
are re-scored with the local copy of the head (a few ``[M, W]`` ops). What is refreshed is the
pair features only: the head's node term (``node_part``, from the fusion encoder's h) and, for a
model that damps churn, the h that Δ reads stay the step start's, since running the encoder
again (node state, neighbours, queue) would be a whole model call per placement. So a re-scored
node's score is the head's on its current pair features and the step-start embeddings, not what
a fresh call on the current cluster would answer (:mod:`inference.lookahead` compares the two for
the serving model). Which nodes are re-scored:

- a lean model's pair features depend on the node alone: the nodes whose free capacity moved
  since the step start are re-scored;
- a model with FGD's fragmentation columns: their tie-set and pick columns depend on every
  node, so the job's rows come from the pair cache (FGD's terms recomputed on the changed
  nodes only) and every node whose row moved is re-scored;
- a node the filters accept that the model did not score (it scores only where the job's
  shape fits by resources, ``-inf`` elsewhere; a filter chain without the health filter
  lets such a node through) is scored here.

Only the ``feasible`` nodes are re-scored: the filters mask the others anyway.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.features.pair_cache import PairCache
from inference.features.pairs import pair_features
from inference.features.spec import FeatureSpec
from inference.prepared_step import PreparedStep
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


def moved_nodes(step: PreparedStep, i: int, job: JobRequest, snapshot: ClusterSnapshot, spec: FeatureSpec,
                feasible: np.ndarray, pair_cache: PairCache) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """bool ``[N]``: the feasible nodes whose score for the step's job ``i`` must be recomputed now,
    and (fragmentation specs) float32 ``[N, P]``: the job's current pair rows, else ``None``."""
    pairs = None
    if spec.workload and step.pairs is not None and step.which is not None:
        # the job's rows now (the cache recomputes the nodes changed since it last saw them) against
        # the step's: no separate pass for "did anything change" (a comparison of the whole
        # cluster state, ~50 µs a job, when after the step's first placement the answer is yes)
        pairs = pair_cache.pairs([job], snapshot, spec)[0]
        changed = (pairs != step.pairs[step.which[i]]).any(axis=1)
    else:
        changed = step.changed(snapshot)
        if spec.workload and changed.any():  # no step-start rows to compare with: every node
            changed[:] = True
    changed &= feasible
    changed |= feasible & np.isneginf(step.scores[i])
    return changed, pairs


def rescore(model: Any, step: PreparedStep, job: JobRequest, job_row: np.ndarray, snapshot: ClusterSnapshot,
            spec: FeatureSpec, nodes: np.ndarray, scores: np.ndarray,
            pairs: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """``scores`` (float64 ``[N]``) with ``nodes`` re-scored on the current state by ``model`` (the
    step's own version); ``pairs [N, P]``: the job's current pair rows, when the caller has them."""
    from inference.model.step import score_nodes

    if nodes.any():
        rows = pairs[nodes] if pairs is not None else pair_features(job, snapshot, spec, np.flatnonzero(nodes))
        h = step.outputs.get("h")
        fresh = score_nodes(model, step.node_part[nodes], job_row, rows,
                            None if h is None else np.asarray(h, np.float32)[nodes])  # fmt: skip
        bad = int(np.count_nonzero(np.isnan(fresh) | np.isposinf(fresh)))
        if bad:  # the rest of the step falls back, as for a bad answer (prepared_step.answer_problem)
            raise ValueError(f"the head re-scored {bad} of {len(fresh)} node(s) NaN or +inf")
        scores[nodes] = fresh
    return scores
