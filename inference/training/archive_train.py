"""``train_from_archive``: retrain the scorer from what the archive recorded.

The archive's events are read by ``ops`` (``storage.queries.training_events``) and folded by
:func:`inference.training.archive_events.fold_events`; demonstrations come from
:func:`inference.training.archive.reconstruct` (the state at every
placed decision whose attempt finished, target = the node the live policy chose); the
latest ``val_share`` of them in time is the validation set (a time split: the model is
judged on decisions after the ones it learned from). The model is written as
``<out_root>/<version>/`` with ``source: archive`` in its ``train.json``; ``latest`` is NOT
moved — promotion (:func:`inference.training.promotion.promote`) decides whether it serves.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from inference.features.spec import FeatureSpec
from inference.model.config import ModelConfig
from inference.step_windows import model_window
from inference.training.archive import archive_spec, eligible, reconstruct, split_times
from inference.training.archive_events import ArchiveEvents
from inference.training.imitation import TrainOptions, train_imitation


class NothingToLearnError(ValueError):
    """The archive holds no decision a model could be trained on (empty, or none that qualifies)."""


def validation_cut(events: ArchiveEvents, outcomes: Iterable[str], policies: Iterable[str] | None,
                   val_share: float, since: float | None = None) -> float | None:
    """When the validation period begins: the time of the first of the latest ``val_share`` of the
    eligible decisions (:func:`~inference.training.archive.eligible`), a step's decisions on one side
    (found by review: a split by rank cut a step's decisions, which share their time, in two); None
    with fewer than 10, or no share. The training half learns only what was known then: the workload
    submitted before it, and each decision's outcome as of the cut."""
    split = split_times(events)  # (a step's decisions share its first's time: the cut puts them on one side)
    times = np.sort([split[(p.cluster, p.decision_id)] for p in eligible(events, outcomes, policies, since=since)[0]])
    n_val = int(round(len(times) * val_share)) if len(times) >= 10 else 0
    return float(times[len(times) - n_val]) if n_val > 0 else None


def train_from_archive(events: ArchiveEvents, out_root: Path, *, options: TrainOptions | None = None,
                       config: ModelConfig | None = None, hidden: int = 32, depth: int = 2, text_dim: int = 32,
                       head_hidden: int = 16, head_layers: int = 1, head_rank: int = 4, outcomes: Iterable[str] = ("finished",),
                       policies: Iterable[str] | None = None, max_samples: int | None = 2000,
                       min_feasible: int = 2, tied_targets: bool = False, val_share: float = 0.15, version: str | None = None,
                       archive: str = "", on_batch: Any = None, job_tokens: int = 0, max_tokens: int = 64,
                       cluster: bool = True, frag: bool = True, stability: float = 0.0,
                       encoder: str = "hashed", since: float | None = None) -> Path:  # fmt: skip
    """Reconstruct from ``events`` (:func:`~inference.training.archive_events.fold_events`), train,
    save; returns the model directory. ``config``: the architecture and featurisation (default:
    built from the archive's GPU models and the size options, with the cluster-level and
    fragmentation columns unless ``cluster`` / ``frag`` is False, and ``job_tokens`` slots; their
    tokens are at most ``max_tokens`` of the jobs of the model call that covered each decision,
    :func:`~inference.training.archive.reconstruct`); ``since`` (epoch s): learn from the decisions from
    then on only (``events`` read for that window)."""
    from inference.model.io import save_new_model

    options = options or TrainOptions()
    started = time.perf_counter()
    cut = validation_cut(events, outcomes, policies, val_share, since)
    spec: FeatureSpec = config.spec if config is not None else archive_spec(events, text_dim, cluster=cluster, frag=frag,
                                                                                    encoder=encoder, before=cut)
    # ψ and T as ``semsched train`` builds them: a cost head when its loss has a weight (fragmentation
    # added, run time), the transition model when its loss or Δ's has one or decisions damp by Δ (stability)
    config = config or ModelConfig(spec=spec, hidden=hidden, depth=depth, head_hidden=head_hidden,
                                   head_layers=head_layers, head_rank=head_rank, job_tokens=job_tokens,
                                   cost_dim=2 if options.cost_weight > 0 else 0, stability=stability,
                                   transition=options.transition_weight > 0 or options.delta_weight > 0 or stability > 0)  # fmt: skip
    # a model without job tokens reads none: each state keeps its own row only
    rebuilt = reconstruct(events, spec=spec, outcomes=outcomes, policies=policies, min_feasible=min_feasible,
                          max_samples=max_samples, seed=options.seed, tied_targets=tied_targets,
                          max_tokens=max_tokens if config.job_tokens else 1, cut=cut, since=since)  # fmt: skip
    n = len(rebuilt.demos)
    if n == 0:
        raise NothingToLearnError(f"the archive has no usable placed decisions: {rebuilt.summary()}")
    reconstruct_s = time.perf_counter() - started
    is_val = np.asarray(rebuilt.times) >= cut if cut is not None else np.zeros(n, dtype=bool)
    train, val = rebuilt.demos.subset(~is_val), rebuilt.demos.subset(is_val)
    if not len(train):  # (found by review: every decision before the cut still running then, or one step's)
        raise NothingToLearnError(f"no decision before the validation cut ({cut}) is usable: every one is on the "
                                  f"validation side or was still running then; {rebuilt.summary()}")  # fmt: skip
    model, history = train_imitation(train, config, options, val=val if len(val) else None, on_batch=on_batch)
    experts = sorted(rebuilt.policies)
    named = re.sub(r"[^A-Za-z0-9.+-]+", "-", "+".join(experts)).strip("-")  # ("learned (fallback)": a directory name)
    generated = version is None
    version = version or f"archive-{named}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-s{options.seed}"
    times = np.asarray(rebuilt.times)
    chosen = set(rebuilt.decision_ids)  # the model versions whose own decisions it imitates (review: not said)
    versions = Counter(p.model_version for p in events.placed if p.decision_id in chosen and p.model_version)
    info = {"version": version, "source": "archive", "archive": archive,
            "method": "imitation of the archived placements (listwise cross-entropy over the feasible nodes of the "
                      "rebuilt state; target = the chosen node)",
            "expert": "+".join(experts), "features": {"cluster": spec.cluster, "frag": bool(spec.workload)},
            "aux_weights": {"cost": options.cost_weight, "transition": options.transition_weight,
                            "delta": options.delta_weight}, "stability": config.stability, "outcomes": sorted(outcomes), "tied_targets": tied_targets, "policies": None if policies is None
            else sorted(policies), "warning": rebuilt.state_warning(), "max_samples": max_samples, "min_feasible": min_feasible, "val_share": val_share,
            "imitated_model_versions": dict(sorted(versions.items())), "reconstruction": rebuilt.summary(), "train_states": len(train),
            "val_states": len(val), "val_split": (f"from the first of the latest {val_share:.0%} of the eligible "
                                                  "decisions in time (a step's decisions on one side)"
                                                  if cut is not None else "none (fewer than 10 eligible decisions)"),
            "val_cut": cut, "since": since, "model_window": model_window(),
            "decisions_from": float(times.min()), "decisions_to": float(times.max()),
            "job_tokens": config.job_tokens, "max_tokens": max_tokens if config.job_tokens else None,
            "epochs": options.epochs, "batch": options.batch, "lr": options.lr, "seed": options.seed,
            "reconstruct_seconds": reconstruct_s, "train_seconds": history.seconds,
            "total_seconds": time.perf_counter() - started, "history": history.to_json(),
            "parameters": sum(p.numel() for p in model.parameters())}  # fmt: skip
    return save_new_model(Path(out_root), model, version, info, generated=generated)
