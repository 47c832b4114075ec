"""Writing a model version (inference/model/io.py ``save_model``): whole or not at all, and once.

Found by review: it wrote straight into ``<models>/<version>``, so a second run under the same
version name (``--version nightly`` twice, or two automatic names in the same second) overwrote
the first's weights in place — the serving version's, under its registry row — and a reader could
load a half-written ``model.pt``."""

from __future__ import annotations

import os

import pytest
import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, load_model, save_model
from inference.model import io as model_io

SPEC = FeatureSpec(gpu_models=("A10",), text_dim=8, encoder="hashed-ngram-8")


def scorer(seed: int) -> Scorer:
    torch.manual_seed(seed)
    return Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2))


def weights(directory) -> bytes:
    return (directory / "model.pt").read_bytes()


def test_a_version_is_written_once_and_a_second_run_under_its_name_is_refused(tmp_path):
    first = save_model(tmp_path / "nightly", scorer(0), "nightly", {"run": 1})
    kept = weights(first)
    with pytest.raises(FileExistsError, match="version names must be unique"):
        save_model(tmp_path / "nightly", scorer(1), "nightly", {"run": 2})
    assert weights(first) == kept and load_model(first).version == "nightly"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nightly"]  # no staging left behind
    assert oct(first.stat().st_mode & 0o777) == "0o755"


def test_a_run_that_lost_the_race_for_the_name_leaves_the_winners_version_intact(tmp_path, monkeypatch):
    """The other run's version appears after this one checked the name and before its rename."""
    rename, raced = os.rename, []

    def other_run_first(src, dst):
        if not raced:
            raced.append(dst)
            save_model(dst, scorer(5), "nightly", {"run": "other"})  # (its own rename goes through)
        return rename(src, dst)

    monkeypatch.setattr(model_io.os, "rename", other_run_first)
    with pytest.raises(FileExistsError):
        save_model(tmp_path / "nightly", scorer(1), "nightly", {"run": "mine"})
    monkeypatch.undo()
    assert '"other"' in (tmp_path / "nightly" / "train.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nightly"]


def test_replace_writes_a_version_again(tmp_path):
    save_model(tmp_path / "v", scorer(0), "v")
    again = load_model(save_model(tmp_path / "v", scorer(1), "v", replace=True)).model.state_dict()
    want = scorer(1).state_dict()
    assert all(torch.equal(again[k], want[k]) for k in want)
    assert not all(torch.equal(scorer(0).state_dict()[k], want[k]) for k in want)


def test_a_load_through_latest_reads_one_version_whatever_latest_does_meanwhile(tmp_path, monkeypatch):
    """(Found by review: a promotion between the reads of ``config.json`` and ``model.pt`` gave the first
    version's name and config with the second's weights and path, and ``reload_if_moved`` never saw the move.)"""
    from inference.model import point_latest
    from inference.model.io import reload_if_moved

    save_model(tmp_path / "v1", scorer(1), "v1", {})
    save_model(tmp_path / "v2", scorer(2), "v2", {})
    point_latest(tmp_path, "v1")
    real = ModelConfig.from_json

    def promoted_meanwhile(js):  # v2 lands between the two reads
        point_latest(tmp_path, "v2")
        return real(js)

    monkeypatch.setattr(ModelConfig, "from_json", promoted_meanwhile)
    got = load_model(tmp_path / "latest")
    monkeypatch.setattr(ModelConfig, "from_json", real)
    want = load_model(tmp_path / "v1")
    assert got.version == "v1" and got.path == (tmp_path / "v1").resolve()
    assert all(torch.equal(a, b) for a, b in zip(got.model.state_dict().values(), want.model.state_dict().values(),
                                                  strict=True))  # fmt: skip
    moved = reload_if_moved(tmp_path / "latest", got)
    assert moved is not None and moved.version == "v2"


@pytest.mark.parametrize(("damage", "says"), [
    (lambda d: (d / "config.json").write_text('{"hidden": '), "config.json: not JSON"),
    (lambda d: (d / "config.json").write_text("[1, 2, 3]"), "config.json: not a JSON object (a list)"),
    (lambda d: (d / "config.json").write_bytes(b"\xff\xfe{}"), "config.json: not JSON (UnicodeDecodeError"),
    (lambda d: (d / "model.pt").write_bytes(weights(d)[: len(weights(d)) // 2]), "model.pt: not the weights"),
    (lambda d: (d / "model.pt").write_text("hello"), "model.pt: not the weights"),
])  # fmt: skip
def test_a_damaged_model_directory_is_a_value_error_naming_the_file(tmp_path, damage, says) -> None:
    """Found by review: a config.json that was a list, not UTF-8 or cut off, and a model.pt cut off or of
    text, raised AttributeError, TypeError, UnicodeDecodeError, OSError or torch's advice to unpickle with
    weights_only=False: nothing named the file, and `bench triton` / `models promote` printed tracebacks."""
    directory = save_model(tmp_path / "v", scorer(0), "v")
    damage(directory)
    with pytest.raises(ValueError, match=f"{directory}/{says}".replace("(", r"\(").replace(")", r"\)")):
        load_model(directory)


def test_a_generated_version_name_another_run_took_gets_the_next_number_a_chosen_one_never(tmp_path):
    """Found by review: two trainings ending in the same second generated one name; the second lost its model
    to a FileExistsError traceback."""
    first = model_io.save_new_model(tmp_path, scorer(0), "imitation-fgd-20261205T021345Z-s0", {"run": 1}, generated=True)
    second = model_io.save_new_model(tmp_path, scorer(1), "imitation-fgd-20261205T021345Z-s0", {"run": 2}, generated=True)
    assert second.name == "imitation-fgd-20261205T021345Z-s0-2" and load_model(second).version == second.name
    assert weights(first) != weights(second)
    with pytest.raises(FileExistsError, match="version names must be unique"):
        model_io.save_new_model(tmp_path, scorer(2), "imitation-fgd-20261205T021345Z-s0", {"run": 3}, generated=False)
