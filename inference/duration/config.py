"""``DurationConfig``: everything that defines a trained duration predictor besides its weights.

Saved as ``config.json`` beside ``duration.pt`` (:mod:`inference.duration.io`) and read back
at load time, so a model is always served with the encoder and settings it was trained with.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Mode = Literal["blend", "regression", "retrieval"]
MODES: tuple[str, ...] = ("blend", "regression", "retrieval")


@dataclass
class DurationConfig:
    version: str = "untrained"
    encoder: str = "hashed-ngram-64"  # inference.encoders.get_encoder name
    text_dim: int = 64
    mode: Mode = "blend"  # what predict() answers with
    # retrieval (inference.duration.retrieval.NeighbourIndex)
    k: int = 16
    tau: float = 0.05
    text_weight: float = 1.0
    shape_weight: float = 1.0
    recency: float = 1e-3
    max_rows: int = 200_000
    # regression (inference.duration.regression.MlpRegressor)
    regression_shift: float = 0.0  # added to the MLP's log answer (its median validation residual)
    hidden: int = 128
    layers: int = 2
    epochs: int = 80
    seed: int = 0
    # two-way blend: log answer = a · retrieval + (1 − a) · regression, a = blend_max · exp(−mean d² / blend_scale)
    blend_max: float = 0.5
    blend_scale: float = 0.1
    min_duration_s: float = 1.0  # run times are floored here before the log (a 0 s job is a 1 s job)
    # per-key histories (inference.duration.history): answer = (1 − w) · two-way blend + w · the
    # median of the most specific key with >= history_min_count finished jobs (w = history_weight)
    history_window: int = 32
    history_weight: float = 0.0
    history_min_count: int = 3
    train_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not self.min_duration_s > 0:
            raise ValueError("min_duration_s must be > 0")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if math.isinf(d["blend_scale"]):
            d["blend_scale"] = "inf"
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DurationConfig:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in data.items() if k in known}
        if d.get("blend_scale") == "inf":
            d["blend_scale"] = math.inf
        return cls(**d)
