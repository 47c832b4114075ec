"""``semsched train-dag``: trains the two-stage DAG policy on generated training DAGs, writes a
versioned model and points ``latest`` at it, where the learned DAG schedulers load it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ops.cli.main import app

runner = CliRunner()


def test_train_dag_writes_a_versioned_model_the_dag_schedulers_load(tmp_path):
    from inference.dag.policy import LearnedDagScheduler
    from scheduling.dag import DagGeneratorConfig, held_out_dags

    out = tmp_path / "dag"
    tiny = ["--dags", "2", "--k", "1", "--epochs", "1", "--valid-dags", "2", "--hidden", "8", "--out", str(out)]
    r = runner.invoke(app, ["train-dag", *tiny])
    assert r.exit_code == 0, r.output
    assert (out / "latest").resolve() == (out / "v001").resolve() and "wrote" in r.output and "v001" in r.output
    meta = json.loads((out / "v001" / "config.json").read_text())
    assert meta["net"]["hidden"] == 8  # the architecture the option asked for, saved with the weights
    scheduler = LearnedDagScheduler(out / "latest", strict=True)
    problem = next(iter(held_out_dags(DagGeneratorConfig(), 1)))
    assert scheduler.fallback is None and scheduler.schedule(problem).makespan > 0
    # a second version from the first (no teacher: REINFORCE alone), and latest follows it
    r = runner.invoke(app, ["train-dag", "--init", str(out / "v001"), "--rl-dags", "1", "--rl-samples", "2",
                            "--valid-dags", "2", "--out", str(out)], env={"COLUMNS": "300"})  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (out / "latest").resolve() == (out / "v002").resolve()
    assert "the teacher" not in r.output and "after imitation" not in r.output and "from " in r.output  # (it said nan)
    meta = json.loads((out / "v002" / "config.json").read_text())["meta"]
    # only what ran (found by review: it claimed v001's teacher DAGs and imitation epochs)
    assert (meta["teacher_dags"], meta["teacher_k"], meta["imitation_epochs"], meta["imitation_losses"],
            meta["dagger_dags"], meta["rl_dags"]) == (0, None, 0, [], 0, 1)  # fmt: skip


def test_train_dag_refuses_init_options_that_would_be_ignored(tmp_path):
    """(Found by review: ``--init M --dagger-dags N`` ran no DAgger, and ``--init`` without ``--rl-dags`` trained
    nothing; both published a new version and moved latest to it.)"""
    from inference.dag.model import DagPolicyNet, NetConfig, save_model

    save_model(DagPolicyNet(NetConfig(hidden=8)), tmp_path / "m")
    init = ["train-dag", "--init", str(tmp_path / "m"), "--valid-dags", "1", "--out", str(tmp_path / "dag")]
    r = runner.invoke(app, [*init, "--dagger-dags", "5", "--rl-dags", "1"], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "--dagger-dags" in r.output and "DAgger follows imitation" in r.output, r.output
    r = runner.invoke(app, init, env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "--rl-dags" in r.output and "REINFORCE alone" in r.output, r.output
    assert not (tmp_path / "dag").exists()


def test_train_dag_refuses_an_init_directory_without_a_model(tmp_path):
    r = runner.invoke(app, ["train-dag", "--init", str(tmp_path), "--out", str(tmp_path / "dag")], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "no DAG policy model" in r.output
    assert not (tmp_path / "dag").exists()


def test_train_dag_refuses_an_init_model_that_does_not_load(tmp_path):
    """A corrupt config: the option's error before any training (it was a JSONDecodeError traceback)."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{")
    (tmp_path / "m" / "policy.pt").write_bytes(b"x")
    r = runner.invoke(app, ["train-dag", "--init", str(tmp_path / "m"), "--out", str(tmp_path / "dag")],
                      env={"COLUMNS": "300"})  # fmt: skip
    assert r.exit_code == 2 and "does not load: JSONDecodeError" in r.output, r.output
    assert not (tmp_path / "dag").exists()


def test_train_dag_refuses_a_hidden_width_other_than_the_init_models(tmp_path):
    """It trained the --init model at that model's width and ignored --hidden without a word."""
    from inference.dag.model import DagPolicyNet, NetConfig, save_model

    save_model(DagPolicyNet(NetConfig(hidden=8)), tmp_path / "m")
    r = runner.invoke(app, ["train-dag", "--init", str(tmp_path / "m"), "--hidden", "16", "--out", str(tmp_path / "dag")],
                      env={"COLUMNS": "300"})  # fmt: skip
    assert r.exit_code == 2 and "16 is not the width of the --init model (8)" in r.output, r.output
    assert not (tmp_path / "dag").exists()


def test_train_dag_refuses_a_seed_whose_derived_seeds_leave_32_bits(tmp_path):
    """The validation, REINFORCE and DAgger DAGs use seed + 1000, 2000, 3000 (found by review: --seed up to
    2**32 - 1 was accepted, and the run died with a ValueError after the teacher's rollouts and imitation)."""
    tiny = ["--dags", "1", "--k", "1", "--epochs", "1", "--valid-dags", "1", "--hidden", "8", "--out", str(tmp_path / "dag")]
    r = runner.invoke(app, ["train-dag", "--seed", str(2**32 - 1000), *tiny], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "--seed" in r.output and f"within 0 .. {2**32 - 3001}" in r.output, r.output
    assert not (tmp_path / "dag").exists()


def test_train_dag_refuses_a_latest_that_is_not_a_symlink(tmp_path):
    """(Found by review: with a real ``latest`` directory, it trained, said "latest -> v001" and left it as it was.)"""
    out = tmp_path / "dag"
    (out / "latest").mkdir(parents=True)
    tiny = ["--dags", "1", "--k", "1", "--epochs", "1", "--valid-dags", "1", "--hidden", "8", "--out", str(out)]
    r = runner.invoke(app, ["train-dag", *tiny], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "--out" in r.output and "is a directory, not a symlink" in r.output, r.output
    assert sorted(p.name for p in out.iterdir()) == ["latest"]  # nothing trained, nothing written
