"""``ModelConfig``: the scorer's architecture plus the featurisation it was trained on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from inference.features.spec import FeatureSpec


@dataclass(frozen=True)
class ModelConfig:
    spec: FeatureSpec = field(default_factory=FeatureSpec)
    hidden: int = 32
    depth: int = 2  # fusion layers, 2..10
    knn: int = 8  # neighbours per node when the topology is a k-NN graph
    head_hidden: int = 32  # width of the policy head's (job, node) layers: its cost is pending × nodes × this
    head_layers: int = 2  # hidden layers of the policy head (1 or 2)
    # 0: the nonlinearity runs per (job, node); R > 0: per (job shape, node), the job's own features
    # entering through R coefficients (inference.model.policy_head.ShapeFactoredHead: a step costs
    # shapes × nodes × head_hidden instead of pending × nodes × head_hidden)
    head_rank: int = 0
    # optional heads (issue 4 point 3); a config.json without these keys = heads absent (old models load)
    # outputs of the cost estimator ψ(h, a) (0 = no cost head): 1 = the fragmentation the placement adds (GPUs);
    # 2 = and the job's expected run time, log(1 + s), at nominal node speed (completion = placement time + that)
    cost_dim: int = 0
    transition: bool = False  # the transition model T(h, a) and the self-correction signal Δ
    stability: float = 0.0  # decision time: score − stability · Δ (with the transition model)
    # the pending jobs as tokens of the encoder, pooled into this many slots (inference.model.job_tokens; 0: none)
    job_tokens: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.depth <= 10:
            raise ValueError("depth must be within 2..10")
        if self.hidden < 4 or self.head_hidden < 4:
            raise ValueError("hidden and head_hidden must be >= 4")
        if self.head_layers not in (1, 2):
            raise ValueError("head_layers must be 1 or 2")
        if not 0 <= self.head_rank <= 64:
            raise ValueError("head_rank must be within 0..64")
        if not 0 <= self.job_tokens <= 16:
            raise ValueError("job_tokens must be within 0..16")
        if self.cost_dim < 0 or self.stability < 0:
            raise ValueError("cost_dim and stability must be >= 0")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["spec"] = self.spec.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ModelConfig:
        d = dict(d)
        d["spec"] = FeatureSpec.from_json(d.get("spec", {}))
        return cls(**d)
