"""The node state after a placement: the transition model's training target (issue 4 point 3).

A placement changes the chosen node's row, and with ``FeatureSpec.cluster`` / ``workload`` also the
columns every node carries about the cluster: the share of whole free nodes and of free GPU over the
nodes of the chosen node's GPU model (every node of that model), and the cluster's GPU use, whole free
8-GPU share and fragmentation rate (every node). A demonstration records the chosen node's row after the
placement (``next_row``, its featurisation of the whole cluster after) and before it (``prev_row``), so
the placement's change to those columns is known, and the whole next state follows without recording
``[N, D]`` more per state.

Found by review: the target had been the state with the chosen row replaced alone, a state that cannot
occur (23 of 24 rows differed from the true next state in the reviewer's probe), and T, Δ and the
decision-time lookahead learned and rolled it.

The utilisation column (a hopping window over agents' reports) does not move with a placement; the
recorded row, featurised without the window, carries 0 there, so the state's own value is kept.
"""

from __future__ import annotations

import numpy as np
import torch

from inference.features.spec import FeatureSpec

#: node columns shared by the nodes of one GPU model (inference.features.cluster.cluster_features)
PER_MODEL: tuple[str, ...] = ("model_empty_share", "model_gpu_free_share")
#: node columns shared by every node: the cluster's, broadcast
CLUSTER_WIDE: tuple[str, ...] = ("cluster_gpu_used", "cluster_empty_big_share", "cluster_frag_rate")
#: node columns a placement does not change (the node's tie-break index, the utilisation window)
UNMOVED: tuple[str, ...] = ("priority", "utilisation")


def _columns(spec: FeatureSpec, names: tuple[str, ...]) -> torch.Tensor:
    have = spec.node_names
    return torch.tensor([have.index(n) for n in names if n in have], dtype=torch.long)


def next_states(nodes: torch.Tensor, choice: torch.Tensor, next_row: torch.Tensor, groups: np.ndarray,
                spec: FeatureSpec, prev_row: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """``[B, N, D]``: each state ``nodes[b]`` moved by its placement on node ``choice[b]``, whose row
    after it is ``next_row[b]`` (``[B, D]``) and before it ``prev_row[b]`` (default: ``nodes[b, choice[b]]``);
    ``groups``: each node's GPU-model group (:func:`inference.features.cluster.model_groups` of the
    states' node table).

    The placement's change, ``next_row − prev_row``, is added to the chosen row and, in the shared
    columns, to every node that shares them. A state recorded when its step's model window opened
    (``queue_windows``) predates the step's earlier placements, which ``prev_row`` and ``next_row``
    already hold (found by review: copying ``next_row`` in put those placements into the cluster columns
    and not into their nodes' rows, a state that cannot occur either): the target is the recorded state
    moved by this placement alone, what T is asked to predict from it."""
    b = torch.arange(len(choice))
    before = nodes[b, choice] if prev_row is None else prev_row.to(nodes.dtype)
    change = next_row.to(nodes.dtype) - before
    change[:, _columns(spec, UNMOVED)] = 0
    wide, shared = _columns(spec, CLUSTER_WIDE), _columns(spec, PER_MODEL)
    local = change.clone()
    local[:, wide] = 0
    local[:, shared] = 0
    after = nodes.clone()
    after[b, choice] += local
    if len(wide):
        after[:, :, wide] += change[:, None, wide]
    if len(shared):
        g = torch.tensor(np.asarray(groups), dtype=torch.long)
        same = (g[None, :] == g[choice][:, None])[..., None]  # [B, N, 1]: the chosen node's model
        after[:, :, shared] += torch.where(same, change[:, None, shared], torch.zeros((), dtype=nodes.dtype))
    return after
