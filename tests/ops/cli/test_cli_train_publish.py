"""``semsched train`` records every version it writes (ops/cli/train_publish.py): a ``--no-promote``
run leaves an unevaluated ``candidate`` row in a real chdb archive's ``model_versions``, which a
later ``semsched models promote`` supersedes with its evaluation and decision. Tiny openb-format
inputs (tests/ops/cli/tiny_train.py) keep the training run to seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.cli.main import app
from ops.cli.train_publish import not_evaluated
from ops.model_registry import ArchiveRegistry
from storage.client import close_client, get_client
from tests.ops.cli.tiny_train import TINY, tiny_inputs


@pytest.fixture
def tiny(tmp_path: Path):  # noqa: ANN201
    inputs = tiny_inputs(tmp_path)
    yield inputs
    close_client(str(inputs["dsn"]))


def test_a_no_promote_training_run_is_recorded_as_an_unevaluated_candidate(tiny) -> None:
    models, inputs = tiny["models"], ["--pods", str(tiny["pods"]), "--nodes", str(tiny["nodes"])]
    r = CliRunner().invoke(app, ["train", *TINY, *inputs, "--no-promote", "--archive", tiny["dsn"],
                                 "--out", str(models), "--version", "tiny-1"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert not (models / "latest").exists()  # not serving: only recorded
    registry = ArchiveRegistry(get_client(tiny["dsn"]))
    row = registry.get("tiny-1")
    assert row is not None and row.status == "candidate" and row.source == "simulator" and row.expert == "best-fit"
    assert row.reason == not_evaluated(models / "tiny-1", models) and row.reason.startswith("not evaluated")
    assert row.evaluation == {} and row.candidate_score is None and row.decided_at is None
    assert row.path == str((models / "tiny-1").resolve()) and row.config["spec"]["encoder"] == "hashed-ngram-8"
    assert row.train_metrics["train_seeds"] == [0, 1]

    # promoting it later records the evaluation and the decision as a newer revision of the same row
    r = CliRunner().invoke(app, ["models", "promote", str(models / "tiny-1"), "--models", str(models), *inputs,
                                 "--archive", tiny["dsn"], "--seeds", "100", "--latency-budget-ms", "100000"])  # fmt: skip
    assert r.exit_code == 0, r.output
    [row] = registry.list()
    assert row.version == "tiny-1" and row.status == "promoted" and row.reason.startswith("first version")
    assert row.candidate_score is not None and row.revision > 1


def test_the_promote_hint_judges_a_candidate_against_a_serving_version(tmp_path: Path, monkeypatch) -> None:
    """`--out models/candidates --no-promote` keeps candidates beside models/latest: the hint must
    compare with that, not promote into the candidates' root, where it would beat nothing."""
    from ops.cli.train_publish import promote_hint

    monkeypatch.chdir(tmp_path)  # (the default root, models/, is the working directory's)
    monkeypatch.delenv("SEMSCHED_MODEL_DIR", raising=False)
    candidates = Path("models") / "candidates"
    (candidates / "jt4-s0").mkdir(parents=True)
    (Path("models") / "v1").mkdir()
    hint = f"semsched models promote {candidates / 'jt4-s0'}"
    assert promote_hint(candidates / "jt4-s0", candidates) == hint  # nothing serves: the worker's root, models/
    (Path("models") / "latest").symlink_to("v1")
    assert promote_hint(candidates / "jt4-s0", candidates) == hint  # judged against models/latest
    # a worker that serves another root's latest (docker-compose: /var/lib/semsched/models/latest): that root
    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(tmp_path / "srv" / "models" / "latest"))
    assert promote_hint(candidates / "jt4-s0", candidates) == f"{hint} --models {tmp_path / 'srv' / 'models'}"
    (candidates / "latest").symlink_to("jt4-s0")  # a root that serves: judged there
    assert promote_hint(candidates / "jt4-s0", candidates) == f"{hint} --models {candidates}"


def test_a_version_trained_into_a_root_that_serves_nothing_is_judged_against_the_serving_one(tiny, monkeypatch) -> None:
    """Found by review: `train --out models/candidates` promoted into models/candidates, where the candidate
    beat nothing and became models/candidates/latest, which no worker reads."""
    monkeypatch.chdir(tiny["models"].parent)
    monkeypatch.delenv("SEMSCHED_MODEL_DIR", raising=False)
    inputs = ["--pods", str(tiny["pods"]), "--nodes", str(tiny["nodes"]), "--archive", tiny["dsn"],
              "--promotion-seeds", "100"]  # fmt: skip
    r = CliRunner().invoke(app, ["train", *TINY, *inputs, "--out", "models", "--version", "tiny-1"])
    assert r.exit_code == 0, r.output
    assert (Path("models") / "latest").resolve() == (Path("models") / "tiny-1").resolve()  # the first: serves
    r = CliRunner().invoke(app, ["train", *TINY, *inputs, "--out", "models/candidates", "--version", "tiny-2",
                                 "--seed", "1"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "judging tiny-2 in the root the worker serves from, models" in " ".join(r.output.split())
    assert not (Path("models") / "candidates" / "latest").exists()
    row = ArchiveRegistry(get_client(tiny["dsn"])).get("tiny-2")
    assert row is not None and row.serving_score is not None  # compared with tiny-1, whichever won
    assert (Path("models") / "latest").resolve() in {(Path("models") / "tiny-1").resolve(),
                                                     (Path("models") / "candidates" / "tiny-2").resolve()}


def test_the_promote_hint_records_where_the_candidate_was_recorded(tmp_path: Path) -> None:
    """`train --from-archive --archive X --no-promote` records the candidate in X: promote must too."""
    from ops.cli.train_publish import promote_hint

    assert promote_hint(tmp_path / "v2", tmp_path, "chdb:///data/x").endswith(" --archive chdb:///data/x")
    assert "--archive" not in promote_hint(tmp_path / "v2", tmp_path)


def test_a_trained_version_that_cannot_be_evaluated_exits_1(tiny) -> None:
    """Found by review: 'the candidate does not load' was recorded as a rejection and train exited 0,
    as for a candidate that was judged and not better."""
    import torch
    import typer

    from inference.features.spec import FeatureSpec
    from inference.model import ModelConfig, Scorer, save_model
    from ops.cli.train_publish import publish

    torch.manual_seed(0)
    spec = FeatureSpec(gpu_models=("A10",), text_dim=8, encoder="hashed-ngram-8")
    directory = save_model(tiny["models"] / "broken", Scorer(ModelConfig(spec=spec, hidden=8, depth=2)), "broken")
    (directory / "model.pt").write_bytes(b"not a checkpoint")  # a disk that filled up while it was written
    with pytest.raises(typer.Exit) as e:
        publish(directory, tiny["models"], promote=True, promotion_seeds="100", archive=str(tiny["dsn"]),
                pods=tiny["pods"], nodes=tiny["nodes"])  # fmt: skip
    assert e.value.exit_code == 1
    row = ArchiveRegistry(get_client(tiny["dsn"])).get("broken")
    assert row is not None and row.status == "rejected" and "does not load" in row.reason


def test_where_the_version_will_be_judged_is_checked_before_training(tiny, monkeypatch) -> None:
    """Found by review: only ``--out`` was checked before the training; the root the version is judged in (the
    worker's, when ``--out`` serves nothing) was found unusable after it, and a file given as ``--out`` lost
    the trained model at the save."""
    monkeypatch.chdir(tiny["models"].parent)
    monkeypatch.delenv("SEMSCHED_MODEL_DIR", raising=False)
    (Path("models") / "latest").mkdir(parents=True)  # a directory, not the link a promotion repoints
    inputs = ["--pods", str(tiny["pods"]), "--nodes", str(tiny["nodes"]), "--archive", tiny["dsn"]]
    r = CliRunner().invoke(app, ["train", *TINY, *inputs, "--out", "models/candidates", "--version", "tiny-9"])
    assert r.exit_code == 2 and "latest" in r.output and not Path("models/candidates/tiny-9").exists(), r.output
    Path("elsewhere").write_text("")
    r = CliRunner().invoke(app, ["train", *TINY, *inputs, "--no-promote", "--out", "elsewhere"])
    assert r.exit_code == 2 and "is a file" in " ".join(r.output.split()), r.output
