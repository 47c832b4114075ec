"""The serving tests' model directories (tiny untrained scorers published as versions), and the PID
of a process that is gone (what a killed server or worker leaves names)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, point_latest, save_model

SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=16, encoder="hashed-ngram-16")


#: with FGD's workload columns (and the cluster ones): its requests carry PAIRS
FRAG_SPEC = replace(SPEC, cluster=True, workload=((4000, 500, 1, (), 0.5), (8000, 1000, 2, (), 0.5)))


def publish(root: Path, version: str, seed: int, spec: FeatureSpec = SPEC, **config: object) -> Path:
    """Save a tiny untrained scorer as ``root/version`` and point ``root/latest`` at it."""
    torch.manual_seed(seed)
    model = Scorer(ModelConfig(spec=spec, hidden=8, depth=2, **config))  # type: ignore[arg-type]
    for layer in model.encoder.layers:  # job tokens' attention starts at 0: make the tokens count
        if layer.attend is not None:
            torch.nn.init.normal_(layer.attend.out.weight, std=0.5)
    save_model(root / version, model, version)
    point_latest(root, version)
    return root / "latest"


def dead_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid
