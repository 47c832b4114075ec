"""A duration-model directory: ``config.json`` (format, version, :class:`DurationConfig`) and
``duration.pt`` (the MLP's state and standardisation, and the retrieval index: text vectors,
shape rows and log run times of the finished jobs it was built from; the per-key histories of
:mod:`inference.duration.history`).

``models/duration/<version>/`` by convention, ``models/duration/latest`` a symlink to the
newest (:func:`inference.model.io.point_latest` semantics; gitignored). Loading checks the
format and the shapes, so a stale or corrupt directory fails loudly and ``sjf-learned`` can
fall back with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from inference.duration.config import DurationConfig
from inference.duration.features import SHAPE_DIM
from inference.duration.predictor import LearnedDurationPredictor
from inference.duration.regression import MlpRegressor
from inference.encoders.base import TextEncoder

FORMAT = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "duration.pt"


def save_predictor(directory: str | Path, predictor: LearnedDurationPredictor) -> Path:
    """Write the predictor (its current index included) into ``directory``."""
    import torch

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    idx = predictor.index
    state = {
        "regressor": predictor.regressor.state() if predictor.regressor is not None else None,
        "index_text": torch.from_numpy(idx.text.copy()),
        "index_shape": torch.from_numpy(idx.shape.copy()),
        "index_log_duration": torch.from_numpy(idx.log_durations.copy()),
        "history": predictor.history.state(),
    }
    torch.save(state, directory / WEIGHTS_FILE)
    meta = {"format": FORMAT, "version": predictor.config.version, "config": predictor.config.to_json()}
    (directory / CONFIG_FILE).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return directory


def version_mark(directory: Path) -> tuple[Path, int]:
    """A duration version and when its files last changed (:func:`inference.model.io.version_mark`): a
    version refused once is tried again only when it is written again."""
    from inference.model.io import version_mark as mark

    return mark(directory, (CONFIG_FILE, WEIGHTS_FILE))


def load_predictor(directory: str | Path, *, encoder: TextEncoder | None = None,
                   single_thread: bool = True) -> LearnedDurationPredictor:  # fmt: skip
    """The predictor saved in ``directory``; raises ``FileNotFoundError`` / ``ValueError``.
    ``single_thread``: torch runs 1 intra-op thread from now on (a tiny MLP: threads cost more than
    they give); a worker loading a new version mid-run leaves torch's threads as they are."""
    import torch

    directory = Path(directory)
    meta = json.loads((directory / CONFIG_FILE).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{directory}: unknown duration-model format {meta.get('format')!r}")
    config = DurationConfig.from_json(meta["config"])
    state = torch.load(directory / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    text, shape = state["index_text"].numpy(), state["index_shape"].numpy()
    if text.shape[1:] != (config.text_dim,) or shape.shape[1:] != (SHAPE_DIM,):
        raise ValueError(f"{directory}: index shapes {tuple(text.shape)} / {tuple(shape.shape)} do not match "
                         f"text_dim {config.text_dim} / {SHAPE_DIM} shape features")  # fmt: skip
    regressor = None
    if state["regressor"] is not None:
        if single_thread:
            torch.set_num_threads(1)
        regressor = MlpRegressor(config.text_dim + SHAPE_DIM, config.hidden, config.layers, seed=config.seed)
        regressor.load_state(state["regressor"])
    predictor = LearnedDurationPredictor(config, encoder=encoder, regressor=regressor)
    predictor.index.add(text, shape, state["index_log_duration"].numpy())
    if state.get("history") is not None:  # saved before the histories existed: they start empty
        predictor.history.load_state(state["history"])
    return predictor


def point_latest(root: str | Path, version: str) -> Path:
    """``root/latest`` → ``version``: :func:`inference.model.io.point_latest` (a relative symlink,
    replaced atomically), the same for scorer and duration models."""
    from inference.model.io import point_latest as point

    return point(Path(root), version)
