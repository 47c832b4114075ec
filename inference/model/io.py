"""A model directory: ``model.pt`` (state dict), ``config.json`` (:class:`ModelConfig` and the
version string) and, from training, ``train.json`` (losses, data sizes, timings).

``models/<version>/`` is written by ``semsched train``; ``models/latest`` is a symlink to the
newest. Loading checks that the weights match the config (shapes), so a mismatched or
corrupt directory fails loudly and the policy can fall back.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from inference.model.config import ModelConfig
from inference.model.config_file import read_config
from inference.model.scorer import Scorer

FORMAT = 1


@dataclass
class LoadedModel:
    model: Scorer
    config: ModelConfig
    version: str
    path: Path


def save_model(directory: Path, model: Scorer, version: str, train_info: dict[str, Any] | None = None,
               *, replace: bool = False) -> Path:  # fmt: skip
    """Write the version into ``directory``, whole or not at all: into a temporary sibling, renamed
    into place at the end, so no reader (a worker following ``latest``, a server loading a sibling
    version) ever sees it half-written. ``FileExistsError`` when ``directory`` holds a version
    already (two runs with one version name must not overwrite each other, least of all the serving
    one), unless ``replace`` (tests that publish a version again)."""
    def fill(staging: Path) -> None:
        torch.save(model.state_dict(), staging / "model.pt")
        config = {"format": FORMAT, "version": version, "model": model.config.to_json()}
        (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if train_info is not None:
            (staging / "train.json").write_text(json.dumps(train_info, indent=2, default=str) + "\n")

    return publish_directory(Path(directory), fill, replace=replace)


def save_new_model(root: Path, model: Scorer, version: str, train_info: dict[str, Any], *,
                   generated: bool) -> Path:  # fmt: skip
    """:func:`save_model` as ``root/version``; a ``generated`` name (a time to the second) that another run
    took meanwhile becomes ``version-2``, ``-3`` … (found by review: two runs ending in the same second
    lost the second's trained model to a FileExistsError). A name the user chose is never changed."""
    for n in range(1, 100):
        name = version if n == 1 else f"{version}-{n}"
        try:
            return save_model(Path(root) / name, model, name, train_info | {"version": name})
        except FileExistsError:
            if not generated:
                raise
    raise FileExistsError(f"{Path(root) / version}-2 … -99 exist: version names must be unique")


def publish_directory(directory: Path, fill: Callable[[Path], None], *, replace: bool = False) -> Path:
    """``directory`` written whole or not at all: ``fill`` writes into a temporary sibling, renamed into
    place at the end (what :func:`save_model` and a promotion's copy of a candidate do).
    ``FileExistsError`` when ``directory`` holds something already, or another process put something
    there meanwhile (an empty directory is taken: rename replaces it), unless ``replace``."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists() and any(directory.iterdir()) and not replace:
        raise FileExistsError(f"{directory} exists: version names must be unique")
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        fill(staging)
        staging.chmod(0o755)  # (mkdtemp's 0700)
        if replace and directory.exists():
            shutil.rmtree(directory)
        try:
            os.rename(staging, directory)  # atomic; refused when another run put a version there meanwhile
        except OSError as e:
            raise FileExistsError(f"{directory} exists: version names must be unique ({e.strerror})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def load_model(directory: Path, device: str | torch.device = "cpu") -> LoadedModel:
    """The model in ``directory`` (eval mode) on ``device`` (a torch device: ``cpu`` for the worker's
    own copies, the server's choice for the Triton models, see
    :func:`inference.serving.host.pick_device`); raises ``FileNotFoundError`` / ``ValueError`` /
    torch errors. Through a symlink (``models/latest``), the version it points to when the load begins
    (found by review: ``latest`` repointed between the two reads gave one version's config and name
    with another's weights, and the path of the second, so the move was never seen)."""
    try:  # both files from one version, whatever ``latest`` does meanwhile
        directory = Path(directory).resolve(strict=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"no model directory at {directory}") from None
    meta = read_config(directory)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{directory}: unknown model format {meta.get('format')!r}")
    try:
        config = ModelConfig.from_json(meta["model"])
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"{directory / 'config.json'}: not a model's config ({type(e).__name__}: {e})") from None
    model = Scorer(config)
    weights = directory / "model.pt"
    try:
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    except FileNotFoundError:
        raise FileNotFoundError(f"{weights}: missing") from None
    except Exception as e:  # noqa: BLE001 - torch's unpickling and loading errors have no common base
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise ValueError(f"{weights}: not the weights of the model its config describes (truncated, another "
                         f"file, another architecture?): {type(e).__name__}: {first}") from None  # fmt: skip
    model.to(device)
    model.eval()
    return LoadedModel(model, config, str(meta["version"]), directory)


def model_device(loaded: LoadedModel) -> torch.device:
    """The device ``loaded``'s weights are on."""
    return next(loaded.model.parameters()).device


def point_latest(root: Path, version: str) -> Path:
    """``root/latest`` → ``version`` (a relative symlink, replaced atomically)."""
    if version in ("latest", "") or "/" in version:
        raise ValueError(f"latest cannot point at {version!r}: a version is a directory of {root}")
    link = Path(root) / "latest"
    tmp = Path(root) / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(version)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)  # (found by review: left behind when latest is a directory)
        raise
    return link


def check_latest(root: Path) -> None:
    """``ValueError`` when ``root/latest`` is there but not a symlink (a copy put there by hand):
    :func:`point_latest` cannot replace it, so a command that publishes checks it before training
    (found by review: train-dag left a ``latest`` directory as it was and said it pointed at the new version)."""
    link = Path(root) / "latest"
    if link.exists() and not link.is_symlink():
        kind = "a directory" if link.is_dir() else "a file"
        raise ValueError(f"{link} is {kind}, not a symlink, so it cannot point at the new version: move it away "
                         f"(a model to keep: make it a version, mv {link} {Path(root) / '<name>'})")  # fmt: skip


def reload_if_moved(model_dir: Path, current: LoadedModel, device: str | torch.device | None = None,
                    refused: set[tuple[Path, int]] | None = None) -> LoadedModel | None:  # fmt: skip
    """The model ``model_dir`` resolves to now, when that is another directory than ``current``'s
    (``models/latest`` was repointed), on ``device`` (default: where ``current`` runs); ``None`` when
    it did not move. Raises when the new directory does not load (the caller keeps serving
    ``current`` and reports it). ``refused``: the versions (:func:`version_mark`) that failed to load
    before, or that the caller refused; one is not loaded again until it changes (found by review:
    a broken version was loaded again at every check, in the worker's step)."""
    target = Path(model_dir).resolve(strict=True)
    if current.path is not None and target == Path(current.path):
        return None
    if refused is not None and version_mark(target) in refused:
        return None
    try:
        return load_model(target, model_device(current) if device is None else device)
    except Exception as e:
        if refused is not None:
            refused.add(version_mark(target))
        raise ValueError(f"{target}: {type(e).__name__}: {e}") from e


def version_mark(directory: Path, files: tuple[str, ...] = ("config.json", "model.pt")) -> tuple[Path, int]:
    """A version directory and when its ``files`` last changed (a refused version written again is tried
    again); a duration model's are ``config.json`` and ``duration.pt``."""
    paths = [directory / f for f in files]
    return directory, max((f.stat().st_mtime_ns for f in paths if f.exists()), default=0)
