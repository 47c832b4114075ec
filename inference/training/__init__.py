"""Training the learned scorer: expert demonstrations (:mod:`.collect`) and imitation (:mod:`.imitation`)."""

from inference.training.collect import Demonstrations, RecordingPolicy, collect_fill
from inference.training.imitation import TrainHistory, TrainOptions, evaluate, listwise_loss, train_imitation

__all__ = ["Demonstrations", "RecordingPolicy", "TrainHistory", "TrainOptions", "collect_fill", "evaluate",
           "listwise_loss", "train_imitation"]  # fmt: skip
