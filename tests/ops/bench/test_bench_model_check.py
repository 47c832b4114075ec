"""A benchmark runs one model version, the one its report names (ops/bench/model_check.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, point_latest, save_model
from inference.policy import MODEL_DIR_ENV, LearnedPolicy
from ops.bench.model_check import learned_version, model_pinned

SPEC = FeatureSpec(gpu_models=("A10",), text_dim=8, encoder="hashed-ngram-8")


def publish(root: Path, version: str) -> None:
    torch.manual_seed(len(version))
    save_model(root / version, Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2)), version)
    point_latest(root, version)


def test_a_benchmark_keeps_the_version_latest_named_at_its_start(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """(Found by review: bench fill, trace, step and learned followed ``latest`` mid-run, and each seed's
    new policy loaded whatever it pointed to then, while the report named the first version.)"""
    publish(tmp_path, "va")
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "latest"))

    @model_pinned
    def bench(*, model_dir: Path | None = None) -> tuple[str | None, str | None, str | None, Path | None]:
        named, _ = learned_version(["learned"])
        publish(tmp_path, "vb")  # a promotion lands during the run
        later = LearnedPolicy(window=0)
        later.backend.refresh(force=True)
        return named, later.model_version, LearnedPolicy().model_version, model_dir

    named, later, fresh, model_dir = bench(model_dir=None)
    assert named == later == fresh == "va" and model_dir == (tmp_path / "va").resolve()
    assert os.environ[MODEL_DIR_ENV] == str(tmp_path / "latest")  # put back after the run


def test_a_benchmark_keeps_the_duration_model_latest_named_at_its_start_and_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """(Found by review: each row's learned ordering loaded ``models/duration/latest`` as it was then, so one
    report could mix duration versions, and no report named one.)"""
    from inference.duration.config import DurationConfig
    from inference.duration.io import point_latest as point_duration_latest
    from inference.duration.io import save_predictor
    from inference.duration.ordering import MODEL_DIR_ENV as DURATION_DIR_ENV
    from inference.duration.ordering import SjfLearned
    from inference.duration.predictor import LearnedDurationPredictor
    from ops.bench.model_check import duration_version

    root = tmp_path / "duration"

    def publish_duration(version: str) -> None:
        config = DurationConfig(version=version, mode="retrieval", encoder="hashed-ngram-8", text_dim=8)
        save_predictor(root / version, LearnedDurationPredictor(config))
        point_duration_latest(root, version)

    publish_duration("d1")
    monkeypatch.setenv(DURATION_DIR_ENV, str(root / "latest"))
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "none"))

    @model_pinned
    def bench() -> tuple[str | None, str | None]:
        named = duration_version(["sjf-learned+best-fit"])
        publish_duration("d2")  # a new duration model lands during the run
        return named, SjfLearned().model_version

    assert bench() == ("d1", "d1")
    assert duration_version(["sjf-learned+best-fit"]) == "d2" and duration_version(["fifo+best-fit"]) is None
    assert os.environ[DURATION_DIR_ENV] == str(root / "latest")  # put back after the run


def test_a_replay_of_the_trace_the_duration_model_learned_from_is_flagged(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: `bench trace`/`sweep` ran sjf-learned on the trace its duration model had learned from
    (75 % of its jobs, whose run times the retrieval index hands back) without a word."""
    from inference.duration.config import DurationConfig
    from inference.duration.io import point_latest as point_duration_latest
    from inference.duration.io import save_predictor
    from inference.duration.ordering import MODEL_DIR_ENV as DURATION_DIR_ENV
    from inference.duration.predictor import LearnedDurationPredictor
    from ops.bench.model_check import duration_trained_on

    config = DurationConfig(version="d1", mode="retrieval", encoder="hashed-ngram-8", text_dim=8,
                            train_info={"trace": "google2011", "cut_s": 12345.0})  # fmt: skip
    save_predictor(tmp_path / "d1", LearnedDurationPredictor(config))
    point_duration_latest(tmp_path, "d1")
    monkeypatch.setenv(DURATION_DIR_ENV, str(tmp_path / "latest"))
    seen = duration_trained_on(["fifo+best-fit", "sjf-learned+best-fit"], "google2011")
    assert seen is not None and "d1 learned from this trace" in seen and "12,345 s" in seen
    assert duration_trained_on(["sjf-learned+best-fit"], "openb") is None
    assert duration_trained_on(["fifo+best-fit", "sjf-predicted+best-fit"], "google2011") is None


def test_the_recorded_command_runs_again_as_it_was() -> None:
    """Found by review: the report's command joined the arguments unquoted; a policy list with a space
    ("las+best-fit, fgd") was recorded as two arguments and failed when re-run."""
    import shlex

    from ops.bench import invoked_command

    argv = ["semsched", "bench", "trace", "--policies", "las+best-fit, fgd", "--out", "my reports"]
    line = invoked_command(argv)
    assert line == "semsched bench trace --policies 'las+best-fit, fgd' --out 'my reports'"
    assert shlex.split(line)[2:] == argv[2:]
