"""The worker's warm-up steps (streams/policy_warm_up.py) with a real learned policy: once at
start, then once per new, settled node table of a cluster while the worker idles; heuristics skip it.

The scheduling loop's surface is stood in by :class:`Loop` (the real loop needs a Faust worker; the
integration test ``test_learned_worker`` checks the start-up warm-up in a real worker)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, load_model, save_model
from inference.policy import LearnedPolicy
from scheduling.node import NodeView
from scheduling.policies import get_policy
from streams import policy_warm_up
from streams.policy_warm_up import PolicyWarmUp

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


def small_nodes(n: int, cluster: str = "a") -> list[NodeView]:
    return [NodeView(f"n{i}", cpu_milli=32_000, memory_mib=65_536, num_gpu=(0, 2, 4)[i % 3],
                     gpu_model=(None, "T4", "A10")[i % 3], cluster=cluster) for i in range(n)]  # fmt: skip


class Loop:
    def __init__(self, policy: Any, clusters: dict[str, list[Any]]) -> None:
        self.policy, self.clusters, self.owned = policy, clusters, {0}
        self.stats: dict[str, float] = {}
        self.tables: dict[str, Any] = {}
        self.since: dict[str, float] = {}
        self.sizes: dict[str, int] = {}
        self.views = self

    def nodes(self, owned: set[int]) -> dict[str, list[Any]]:
        return self.clusters

    def track_inventory(self, cluster: str, n: int) -> None:
        if self.sizes.get(cluster) != n:
            self.sizes[cluster], self.since[cluster] = n, policy_warm_up.time.time()

    def inventory_since(self, cluster: str) -> float:
        return self.since.get(cluster, 0.0)


def learned(tmp_path: Path) -> LearnedPolicy:
    torch.manual_seed(0)
    save_model(tmp_path / "m", Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, head_rank=2)), "warm-v1")
    return LearnedPolicy(loaded=load_model(tmp_path / "m"))


def test_warm_ups_at_start_and_once_per_new_settled_table(tmp_path, monkeypatch):
    policy = learned(tmp_path)
    loop = Loop(policy, {"a": small_nodes(12)})
    warm = PolicyWarmUp(loop)  # type: ignore[arg-type]
    asyncio.run(warm.at_start())
    assert loop.stats["warm_ups"] == 1 and loop.stats["warm_up_s"] > 0 and not policy.caches.pairs
    asyncio.run(warm.idle_clusters())  # the inventory just appeared: not settled yet
    assert loop.stats["warm_ups"] == 1
    monkeypatch.setattr(policy_warm_up, "SETTLE_S", 0.0)
    asyncio.run(warm.idle_clusters())
    table = loop.tables["a"]
    assert loop.stats["warm_ups"] == 2 and id(table) in policy.caches.pairs  # the real table's cache is kept
    assert policy.caches.pairs[id(table)].stats.calls > 0  # the model was called on cluster "a"'s nodes
    asyncio.run(warm.idle_clusters())  # the same nodes: nothing to do
    assert loop.stats["warm_ups"] == 2 and loop.tables["a"] is table
    loop.clusters["a"] = small_nodes(13)  # a node joined: a new table
    asyncio.run(warm.idle_clusters())
    assert loop.stats["warm_ups"] == 3 and loop.tables["a"] is not table
    assert policy.model_calls == 0  # warm-ups are not the worker's steps


def test_a_heuristic_has_nothing_to_warm_up(monkeypatch):
    monkeypatch.setattr(policy_warm_up, "SETTLE_S", 0.0)
    loop = Loop(get_policy("best-fit"), {"a": small_nodes(4)})
    warm = PolicyWarmUp(loop)  # type: ignore[arg-type]
    asyncio.run(warm.at_start())
    asyncio.run(warm.idle_clusters())
    assert loop.stats["warm_ups"] == 0 and not loop.tables


def test_an_idle_tick_warms_one_cluster_up(tmp_path, monkeypatch):
    """Found by review: one idle tick warmed every cluster whose table changed, one after another, while a
    job that arrived waited for the loop (with Triton, a round trip per cluster)."""
    monkeypatch.setattr(policy_warm_up, "SETTLE_S", 0.0)
    loop = Loop(learned(tmp_path), {c: small_nodes(6, cluster=c) for c in ("a", "b", "c")})
    warm = PolicyWarmUp(loop)  # type: ignore[arg-type]
    for ticks in (1, 2, 3, 3):  # (the fourth: nothing left to warm)
        asyncio.run(warm.idle_clusters())
        assert loop.stats["warm_ups"] == ticks and len(loop.tables) == ticks
        assert set(loop.sizes) == {"a", "b", "c"}  # every cluster's inventory is tracked at each tick
