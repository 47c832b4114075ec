"""The torch scorer (fusion encoder + policy head), its config and its model directory."""

from inference.model.config import ModelConfig
from inference.model.io import LoadedModel, load_model, point_latest, save_model
from inference.model.scorer import FusionEncoder, PolicyHead, Scorer, TorchTopology

__all__ = ["FusionEncoder", "LoadedModel", "ModelConfig", "PolicyHead", "Scorer", "TorchTopology", "load_model",
           "point_latest", "save_model"]  # fmt: skip
