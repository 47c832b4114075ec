"""DAgger and the auxiliary losses, on a 16-node cluster with tiny models (fast)."""

import numpy as np
import pytest
from inference_helpers import pod_mix, small_nodes

from inference.encoders import EncoderCache, HashedNgramEncoder
from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer
from inference.training import RecordingPolicy, TrainOptions, collect_fill, train_imitation
from inference.training.dagger import learner_factory, run_dagger
from scheduling.fill import run_fill
from scheduling.metrics.fragmentation import Workload
from scheduling.policies import get_policy
from scheduling.policies.base import BasePolicy

PODS = pod_mix(60, seed=2)
SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=8, encoder="hashed-ngram-8", cluster=True,
                   workload=FeatureSpec.workload_rows(Workload.from_jobs(PODS)))  # fmt: skip
CONFIG = ModelConfig(spec=SPEC, hidden=12, head_hidden=12, depth=2, knn=3, cost_dim=1, transition=True)


def encoder() -> EncoderCache:
    return EncoderCache(HashedNgramEncoder(8))


class LastNode(BasePolicy):
    """An expert that always wants the highest-index feasible node (its labels are easy to check)."""

    name = "last-node"

    def score(self, job, snapshot, feasible_mask):
        return np.where(feasible_mask, np.arange(snapshot.num_nodes, dtype=np.float64), -np.inf)


def test_dagger_records_the_learners_states_with_the_experts_labels():
    actor = get_policy("fifo-first-fit")  # acts: lowest feasible index, the opposite of the expert
    rec = RecordingPolicy(LastNode(), SPEC, encoder(), rate=1.0, seed=0, actor=actor, all_ties=True)
    mine = run_fill(small_nodes(16), PODS, rec, 0)
    alone = run_fill(small_nodes(16), PODS, get_policy("fifo-first-fit"), 0)
    assert (mine.allocated == alone.allocated).all()  # the actor decided every placement
    a = rec.demos.arrays()
    assert len(rec.demos) > 20
    last = 15 - np.argmax(a["feasible"][:, ::-1], axis=1)  # the highest feasible index per state
    assert (a["choice"] == last).all() and a["target"][np.arange(len(last)), last].all()
    # the recorded states are the actor's: the first node fills up, which the expert would never do
    used = 1.0 - a["nodes"][:, 0, SPEC.node_names.index("gpu_free_frac")]
    assert used.max() > 0.5


def test_run_dagger_adds_learner_states_and_retrains():
    expert = lambda seed: get_policy("fgd", workload=Workload.from_jobs(PODS))  # noqa: E731
    nodes = small_nodes(16)
    opts = TrainOptions(epochs=2, batch=8, target="choice", cost_weight=0.1, transition_weight=0.1, seed=0)
    data = collect_fill(nodes, PODS, expert, [0], SPEC, encoder(), rate=0.5, all_ties=True)
    model, aggregate, rounds = run_dagger(nodes, PODS, expert, [0], SPEC, encoder(), CONFIG, opts, rounds=1,
                                          rate=0.5, data=data, round_epochs=1)  # fmt: skip
    assert len(rounds) == 1 and rounds[0].added > 0 and len(aggregate) == len(data) + rounds[0].added
    assert any("dagger" in s for s in aggregate.source)
    assert aggregate.has("choice") and aggregate.has("cost") and aggregate.has("next_row")
    policy = learner_factory(model, CONFIG)(0)  # the learner runs as the 'learned' policy, no fallback
    run = run_fill(nodes, PODS, policy, 0)
    assert run.placed > 0 and not policy.fell_back and not policy.last_step.fallback


def test_choice_target_and_aux_losses_decrease():
    expert = lambda seed: get_policy("fgd", workload=Workload.from_jobs(PODS))  # noqa: E731
    data = collect_fill(small_nodes(16), PODS, expert, [0, 1], SPEC, encoder(), rate=1.0, all_ties=True)
    opts = TrainOptions(epochs=12, batch=8, lr=1e-2, target="choice", cost_weight=1.0, transition_weight=1.0,
                        delta_weight=0.01, seed=0)  # fmt: skip
    model, h = train_imitation(data, CONFIG, opts)
    assert h.loss[-1] < 0.5 * h.loss[0]
    assert h.aux[-1]["cost"] < 0.5 * h.aux[0]["cost"] and h.aux[-1]["transition"] < h.aux[0]["transition"]
    assert "delta" in h.aux[-1]
    assert h.agreement[-1] >= 0.9  # FGD's own pick is a feature: the exact pick is learnable


def test_learner_factory_needs_no_model_dir():
    policy = learner_factory(Scorer(CONFIG), CONFIG)(3)
    assert policy.model_version == "dagger" and not policy.fell_back


@pytest.mark.parametrize("target", ["set", "choice"])
def test_demonstrations_without_the_optional_fields_still_train(target):
    d = collect_fill(small_nodes(16), PODS, lambda s: get_policy("best-fit"), [0], SPEC, encoder(), rate=1.0)
    d.choice, d.cost, d.run_time, d.next_row, d.prev_row = [], [], [], [], []  # as code that appends only the required fields leaves them
    assert not d.has("choice") and set(d.arrays()) == {"nodes", "pairs", "jobs", "queues", "feasible", "target"}
    _, h = train_imitation(d, CONFIG, TrainOptions(epochs=1, batch=8, target=target, cost_weight=1.0,
                                                  transition_weight=1.0))  # fmt: skip
    assert h.aux[-1] == {} and np.isfinite(h.loss[-1])


def test_the_fragmentation_label_does_not_depend_on_the_feature_columns():
    """ψ's fragmentation label is measured against the pod list's workload whether or not the model
    reads FGD's columns (found by review: without them it was 0 everywhere)."""
    import dataclasses


    full = dataclasses.replace(SPEC, workload=FeatureSpec.workload_rows(Workload.from_jobs(PODS)))
    lean = dataclasses.replace(SPEC, workload=())
    got = [collect_fill(small_nodes(16), PODS, lambda s: get_policy("best-fit"), [0], spec, encoder(), rate=1.0).cost
           for spec in (full, lean)]  # fmt: skip
    assert any(c.any() for c in got[0])
    for a, b in zip(*got, strict=True):
        np.testing.assert_array_equal(a, b)
