"""DAgger (Ross et al., 2011) on the fill sequences: the learner drives, the expert labels.

Imitation alone trains on the states the EXPERT visits; the learner's rare disagreements
then lead it into states it never saw, where errors compound. Each DAgger round

1. rolls the current learner (the ``learned`` policy, in-process) through the fill sequences
   of the training seeds; at a ``rate`` share of its decisions the state it is in is recorded
   with the expert's label (:class:`inference.training.collect.RecordingPolicy` with
   ``actor=``; ``beta``: the share of decisions the expert takes instead);
2. adds those states to the aggregate;
3. retrains on the aggregate, continuing from the current weights (``round_epochs``).

Round 0 is the plain imitation run (:func:`inference.training.imitation.train_imitation`),
done by the caller or here when ``init`` is None.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from inference.encoders.base import TextEncoder
from inference.features.spec import FeatureSpec
from inference.model.config import ModelConfig
from inference.model.scorer import Scorer
from inference.training.collect import Demonstrations, collect_fill
from inference.training.imitation import TrainHistory, TrainOptions, train_imitation
from scheduling.job import JobRequest
from scheduling.policies.base import Policy


def learner_factory(model: Scorer, config: ModelConfig, version: str = "dagger") -> Callable[[int], Policy]:
    """A fresh ``learned`` policy per seed, serving ``model`` in-process (no model directory)."""
    from inference.model.io import LoadedModel
    from inference.policy import LearnedPolicy

    loaded = LoadedModel(model, config, version, Path("."))
    return lambda seed: LearnedPolicy(loaded=loaded)


@dataclass
class DaggerRound:
    round: int
    added: int  # states recorded on the learner's rollouts
    total: int  # the aggregate after the round
    train_agreement: float
    val_agreement: float | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_dagger(nodes: Sequence, pods: Sequence[JobRequest], expert_factory: Callable[[int], Policy],
               seeds: Sequence[int], spec: FeatureSpec, encoder: TextEncoder, config: ModelConfig,
               options: TrainOptions, *, rounds: int, rate: float, round_epochs: int | None = None,
               beta: float = 0.0, data: Demonstrations | None = None, init: Scorer | None = None,
               val: Demonstrations | None = None, seed: int = 0,
               on_seed: Callable[[int, int], None] | None = None,
               on_batch: Callable[[int, int, float], None] | None = None) -> tuple[Scorer, Demonstrations,
                                                                                  list[DaggerRound]]:  # fmt: skip
    """``rounds`` DAgger rounds from ``init`` trained on ``data`` (both built here by plain
    imitation of the expert when None). Returns the final model, the aggregate and a row per round."""
    if data is None:
        data = collect_fill(nodes, pods, expert_factory, seeds, spec, encoder, rate=rate, seed=seed, on_seed=on_seed,
                            all_ties=options.target == "choice")  # fmt: skip
    if init is None:
        init, _ = train_imitation(data, config, options, val=val, on_batch=on_batch)
    model = init
    history: list[DaggerRound] = []
    aggregate = Demonstrations()
    aggregate.extend(data)
    for r in range(1, rounds + 1):
        t0 = time.perf_counter()
        added = collect_fill(nodes, pods, expert_factory, seeds, spec, encoder, rate=rate, seed=seed + 7919 * r,
                             on_seed=on_seed, all_ties=options.target == "choice",
                             actor_factory=learner_factory(model, config, f"dagger-{r}"), beta=beta)  # fmt: skip
        aggregate.extend(added)
        opts = replace(options, epochs=round_epochs or options.epochs, seed=options.seed + r)
        model, h = train_imitation(aggregate, config, opts, val=val, on_batch=on_batch, init=model)
        history.append(_row(r, len(added), len(aggregate), h, time.perf_counter() - t0))
    return model, aggregate, history


def _row(r: int, added: int, total: int, h: TrainHistory, seconds: float) -> DaggerRound:
    return DaggerRound(r, added, total, h.agreement[-1] if h.agreement else float("nan"),
                       h.val_agreement[-1] if h.val_agreement else None, seconds)  # fmt: skip
