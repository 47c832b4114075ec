"""What the ``learned`` policy keeps from one scheduling step to the next
(:class:`inference.policy.LearnedPolicy`): text embeddings, pair features, the pending jobs'
feature rows and the topologies.

Between two steps of a worker little changes — most pending jobs and shapes are the same, and
only the nodes a placement, a finish or a health report touched have a new free capacity — so
each of these is computed once and brought up to date, not rebuilt. A worker steps each of its
clusters in turn, so the pair features are kept per node table, for the ``MAX_TABLES`` most
recently stepped.
"""

from __future__ import annotations

from inference.encoders import EncoderCache, get_encoder
from inference.features.jobs import JobRows
from inference.features.pair_cache import PairCache
from inference.model.step import TopologyCache
from scheduling.snapshot import ClusterSnapshot

MAX_TABLES = 4  # node tables (clusters) whose pair features are kept


class StepCaches:
    def __init__(self) -> None:
        self.encoders: dict[str, EncoderCache] = {}  # per text encoder name (a new version may change it)
        self.pairs: dict[int, PairCache] = {}  # per node table: the step's pair features
        self.lookahead_pairs: dict[int, PairCache] = {}  # per node table: the rollouts' own (their copies of
        # the cluster differ from the step's state on a node or two)
        self.job_rows = JobRows()  # the pending jobs' feature rows
        self.topologies = TopologyCache(MAX_TABLES)  # G_t, for the h_t the lookahead encodes on this side

    def encoder(self, name: str) -> EncoderCache:
        """The text encoder ``name`` (a feature spec's) behind a cache of the texts it embedded."""
        if name not in self.encoders:
            self.encoders[name] = EncoderCache(get_encoder(name))
        return self.encoders[name]

    def pair_cache(self, snapshot: ClusterSnapshot, lookahead: bool = False) -> PairCache:
        """The pair features kept for ``snapshot``'s node table (``lookahead``: the rollouts' set).
        A cache holds its table, so the id is not reused while it is here."""
        caches = self.lookahead_pairs if lookahead else self.pairs
        key = id(snapshot.table)
        cache = caches.pop(key, None) or PairCache()
        caches[key] = cache  # most recent last
        while len(caches) > MAX_TABLES:
            del caches[next(iter(caches))]
        return cache

    def forget(self, snapshot: ClusterSnapshot) -> None:
        """Drop the pair features of ``snapshot``'s node table (a made-up warm-up cluster)."""
        self.pairs.pop(id(snapshot.table), None)
        self.lookahead_pairs.pop(id(snapshot.table), None)
