"""The serving tests' model directories: tiny untrained scorers published as versions."""

from __future__ import annotations

from pathlib import Path

import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, point_latest, save_model

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


def publish(root: Path, version: str, seed: int, **config: object) -> Path:
    """Save a tiny untrained scorer as ``root/version`` and point ``root/latest`` at it."""
    torch.manual_seed(seed)
    save_model(root / version, Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2, **config)), version)  # type: ignore[arg-type]
    point_latest(root, version)
    return root / "latest"
