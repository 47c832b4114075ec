"""Featurisation of a scheduling step (issue 4 point 1): node state s_t, job demand q_t,
(job, node) pair features on current capacity, topology G_t and the feasibility mask.
Names and dimensions: :mod:`inference.features.spec`. numpy only, vectorised over nodes.
"""

from inference.features.jobs import job_demand
from inference.features.nodes import node_state, static_node_features
from inference.features.pairs import pair_features
from inference.features.spec import JOB_BASE, NODE_BASE, PAIR, FeatureSpec
from inference.features.step import StepFeatures, feasibility, featurise_step
from inference.features.topology import Topology, build_topology

__all__ = ["JOB_BASE", "NODE_BASE", "PAIR", "FeatureSpec", "StepFeatures", "Topology", "build_topology",
           "feasibility", "featurise_step", "job_demand", "node_state", "pair_features",
           "static_node_features"]  # fmt: skip
