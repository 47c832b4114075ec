"""`semsched models list|promote` and `train --from-archive` (ops/cli/models.py,
ops/cli/train_archive.py) on a real chdb archive filled through the archive's write path,
with the openb excerpt of tests/fixtures as the held-out replay's inputs (and the model step
timed on them: only "measured, positive" is asserted of the latency)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ops.cli.models import models_app
from ops.cli.train import train as train_command
from storage.client import close_client, get_client
from storage.migrate import migrate
from storage.writer import ArchiveWriter
from tests.inference.training.training_helpers import live_run

OPENB = Path(__file__).parents[2] / "fixtures" / "traces" / "alibaba-gpu-2023"
runner = CliRunner()


@pytest.fixture
def dsn(tmp_path: Path):  # noqa: ANN201
    dsn = f"chdb://{tmp_path / 'chdb'}"
    client = get_client(dsn)
    migrate(client)
    live_run(ArchiveWriter(client))
    yield dsn
    close_client(dsn)


def _flat(text: str) -> str:
    """The output without whitespace and box drawing (rich wraps long messages in a box)."""
    return "".join(text.split()).replace("│", "")


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(models_app, name="models")
    app.command("train")(train_command)
    return app


def test_train_from_archive_then_promote_then_list(dsn: str, tmp_path: Path) -> None:
    app, models = _app(), tmp_path / "models"
    r = runner.invoke(app, ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(models),
                            "--epochs", "2", "--hidden", "8", "--text-dim", "8", "--version", "arch-1"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (models / "arch-1" / "model.pt").exists() and not (models / "latest").exists()
    assert json.loads((models / "arch-1" / "train.json").read_text())["source"] == "archive"

    promote = ["models", "promote", str(models / "arch-1"), "--models", str(models), "--archive", dsn, "--seeds",
               "100", "--pods", str(OPENB / "openb_pod_list_default.csv"), "--nodes",
               str(OPENB / "openb_node_list_gpu_node.csv"), "--latency-budget-ms", "10000"]  # fmt: skip
    r = runner.invoke(app, promote)  # (a budget no step misses: wall-clock time must not decide this test)
    assert r.exit_code == 0, r.output
    assert "promoted" in r.output and "first version" in r.output
    assert (models / "latest").resolve() == (models / "arch-1").resolve()

    (models / ".arch-2.x1y2").mkdir()  # a killed save's staging directory: not a version (review)
    (models / ".arch-2.x1y2" / "config.json").write_text("{}")
    r = runner.invoke(app, ["models", "list", "--archive", dsn, "--models", str(models), "--json"])
    assert r.exit_code == 0, r.output
    listed = json.loads(r.output)
    assert listed["serving"] == "arch-1" and listed["unrecorded"] == []
    [row] = listed["versions"]
    assert row["version"] == "arch-1" and row["status"] == "promoted" and row["source"] == "archive"
    assert row["evaluation"]["candidate"]["loaded"] and row["candidate_score"] is not None
    latency = row["evaluation"]["candidate"]["latency"]  # timed on every node of the excerpt, 256 pending pods
    assert latency["p99_ms"] > 0 and latency["pending"] == 256 and row["evaluation"]["latency_budget_ms"] == 10000.0
    r = runner.invoke(app, ["models", "list", "--archive", dsn, "--models", str(models)])
    assert r.exit_code == 0 and "arch-1" in r.output and "p99" in r.output


def test_train_from_archive_since_learns_from_the_window_and_says_so(dsn: str, tmp_path: Path) -> None:
    models = tmp_path / "models"  # (the archive's decisions are 2026-03-01 00:00:00-00:00:18 UTC)
    r = runner.invoke(_app(), ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(models),
                               "--epochs", "1", "--hidden", "8", "--text-dim", "8", "--version", "arch-since",
                               "--since", "2026-03-01T00:00:09"])  # fmt: skip
    assert r.exit_code == 0, r.output
    info = json.loads((models / "arch-since" / "train.json").read_text())
    since = datetime(2026, 3, 1, 0, 0, 9, tzinfo=UTC).timestamp()
    assert info["since"] == since and info["decisions_from"] >= since
    assert info["reconstruction"]["skipped"]["before the window (--since)"] > 0  # running at 9 s: read, not learned


def test_train_checks_a_given_archive_before_it_trains(tmp_path: Path) -> None:
    """Found by review: an ``--archive`` given was not looked at before the training; a wrong password or a
    server out of reach failed only when the version was to be recorded, after the whole run."""
    models = tmp_path / "models"
    r = runner.invoke(_app(), ["train", "--no-promote", "--archive", "http://default:wrong@127.0.0.1:1", "--epochs", "1",
                               "--out", str(models)])  # fmt: skip
    assert r.exit_code == 1 and "cannotopenthearchive" in _flat(r.output), r.output
    assert not models.exists() or not any(models.iterdir())  # nothing trained


def test_since_is_an_age_or_a_time() -> None:
    from ops.cli.options import since_time

    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    assert since_time("36h", now) == datetime(2026, 12, 4, 0, tzinfo=UTC) == since_time(" 1.5d ", now)
    assert since_time("2026-12-01", now) == datetime(2026, 12, 1, tzinfo=UTC)
    assert since_time("2026-12-01T08:00:00+02:00", now) == datetime(2026, 12, 1, 6, tzinfo=UTC)
    for bad in ("7 days", "-1d", "", "d"):
        with pytest.raises(typer.BadParameter, match="an age"):
            since_time(bad, now)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)  # an age past any archive: the whole of it (found by review: a traceback)
    assert since_time("1000000d", now) == since_time("99999999999999999999s", now) == epoch


def test_train_from_archive_promotes_on_the_pods_and_nodes_it_is_given(dsn: str, tmp_path: Path) -> None:
    """(Found by review: ``train --from-archive --promote`` ignored --pods / --nodes and replayed the
    default openb inputs.) A pod list that cannot be read is named, not replaced by the default."""
    app, models = _app(), tmp_path / "models"
    r = runner.invoke(app, ["train", "--from-archive", "--archive", dsn, "--out", str(models), "--epochs", "1",
                            "--hidden", "8", "--text-dim", "8", "--version", "arch-pods", "--promotion-seeds", "100",
                            "--pods", str(tmp_path / "no-such-pods.csv"), "--nodes",
                            str(OPENB / "openb_node_list_gpu_node.csv")])  # fmt: skip
    assert r.exit_code != 0 and "no-such-pods.csv" in _flat(r.output), r.output
    assert not (models / "latest").exists()


def test_promote_refuses_a_candidate_over_the_latency_budget(dsn: str, tmp_path: Path) -> None:
    app, models = _app(), tmp_path / "models"
    r = runner.invoke(app, ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(models),
                            "--epochs", "1", "--hidden", "8", "--text-dim", "8", "--version", "arch-slow"])  # fmt: skip
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["models", "promote", str(models / "arch-slow"), "--models", str(models), "--archive", dsn,
                            "--seeds", "100", "--pods", str(OPENB / "openb_pod_list_default.csv"), "--nodes",
                            str(OPENB / "openb_node_list_gpu_node.csv"), "--latency-budget-ms", "0"])  # fmt: skip
    assert r.exit_code == 1, r.output  # refused: a script can tell
    assert "rejected" in r.output and "latency:p99modelstep" in _flat(r.output) and "budget0ms" in _flat(r.output)
    assert not (models / "latest").exists()


def test_promote_refuses_what_is_not_a_model_or_a_benchmark_seed(dsn: str, tmp_path: Path) -> None:
    app = _app()
    r = runner.invoke(app, ["models", "promote", str(tmp_path), "--archive", dsn])
    assert r.exit_code == 2 and "notamodeldirectory" in _flat(r.output)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    r = runner.invoke(app, ["models", "promote", str(tmp_path / "m"), "--archive", dsn, "--seeds", "42-43"])
    assert r.exit_code == 2 and "seeds[42,43]areusedbytraining" in _flat(r.output)


@pytest.mark.parametrize("train", [
    {"train_seeds": [0, 1, 10], "val_seeds": [2]},
    {"train_seeds": [0], "val_seeds": [11]},  # validation chose its epochs
    {"train_seeds": [0], "val_seeds": [1], "rl": {"options": {"seeds": [12, 3]}}},  # fine-tuned by RL on it
])  # fmt: skip
def test_promote_refuses_a_candidate_trained_on_the_replays_seeds(dsn: str, tmp_path: Path, train: dict) -> None:
    """Found by review: only the default replay seeds were checked, so ``--promotion-seeds 10-14`` (or
    ``models promote --seeds``) judged a candidate on what it learned from."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"version": "m"}))
    (tmp_path / "m" / "train.json").write_text(json.dumps(train | {"held_out_seeds": [42, 43]}))
    r = runner.invoke(_app(), ["models", "promote", str(tmp_path / "m"), "--models", str(tmp_path / "models"),
                               "--archive", dsn, "--seeds", "10-14"])  # fmt: skip
    assert r.exit_code == 2 and "oftheheld-outreplay" in _flat(r.output), r.output


def test_train_refuses_promotion_seeds_it_would_train_on(tmp_path: Path) -> None:
    r = runner.invoke(_app(), ["train", "--train-seeds", "0,1,2,3,4,5,6,7,10,11", "--promotion-seeds", "10-14",
                               "--out", str(tmp_path),
                               "--archive", f"chdb://{tmp_path / 'a'}"])  # fmt: skip
    assert r.exit_code == 2 and "seeds[10,11]arethepromotionreplay" in _flat(r.output), r.output
    assert not any(p.name != "a" for p in tmp_path.iterdir())  # refused before any training


@pytest.mark.parametrize("extra", [[], ["--from-archive"]], ids=["fill", "archive"])
def test_train_refuses_promotion_seeds_the_replay_may_not_use_before_training(tmp_path: Path, extra: list[str]) -> None:
    """Seed 9 validates training; 42 is the fill benchmark's (found by review: refused only after training,
    the version left written and unrecorded)."""
    for seeds in ("9", "42"):
        r = runner.invoke(_app(), ["train", *extra, "--promotion-seeds", seeds, "--out", str(tmp_path / "m"),
                                   "--archive", f"chdb://{tmp_path / 'a'}"])  # fmt: skip
        assert r.exit_code == 2 and f"--promotion-seeds{seeds}" in _flat(r.output), r.output
        assert not (tmp_path / "m").exists()  # refused before any training


@pytest.mark.parametrize(("archive", "says"), [
    ("bogus://x", "unsupported ClickHouse DSN 'bogus://x'"),
    ("chdb://{tmp}/typo", "no archive at {tmp}/typo"),  # read: an archive that is not there is not created
])  # fmt: skip
def test_models_list_on_an_archive_it_cannot_open_is_one_line_and_exit_1(archive: str, says: str,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    r = runner.invoke(_app(), ["models", "list", "--archive", archive.format(tmp=tmp_path), "--models", str(tmp_path)])
    assert r.exit_code == 1 and _flat(says.format(tmp=tmp_path)) in _flat(r.output), r.output
    assert isinstance(r.exception, SystemExit)  # not a traceback
    assert not (tmp_path / "typo").exists()


def test_promote_refuses_the_serving_version_and_a_broken_config_in_one_line(dsn: str, tmp_path: Path) -> None:
    """Both were tracebacks, the first after loading every held-out input."""
    app = _app()
    root = tmp_path / "models"
    (root / "v1").mkdir(parents=True)
    (root / "v1" / "config.json").write_text(json.dumps({"version": "v1"}))
    (root / "latest").symlink_to("v1")
    r = runner.invoke(app, ["models", "promote", str(root / "latest"), "--models", str(root), "--archive", dsn])
    assert r.exit_code == 2 and "v1isalreadytheservingversion" in _flat(r.output), r.output
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{x")
    r = runner.invoke(app, ["models", "promote", str(tmp_path / "broken"), "--models", str(root), "--archive", dsn])
    assert r.exit_code == 2 and "isnotareadablemodeldirectory:ValueError:" in _flat(r.output) and "config.json:notJSON(JSONDecodeError" in _flat(r.output), r.output


def test_train_from_an_archive_without_decisions_is_one_line_and_exit_1(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'empty'}"
    migrate(get_client(dsn))
    close_client(dsn)
    try:
        r = runner.invoke(_app(), ["train", "--from-archive", "--archive", dsn, "--no-promote", "--out", str(tmp_path)])
    finally:
        close_client(dsn)
    assert r.exit_code == 1 and "thearchivehasnousableplaceddecisions" in _flat(r.output), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


@pytest.mark.parametrize(("args", "says"), [
    (["--from-archive", "--train-seeds", "0-3", "--expert", "best-fit"], "--expert,--train-seedsdonotapplywith--from-archive"),
    (["--rl-from", "somewhere", "--rl-episodes", "1", "--stability", "0.5"], "--stabilitydoesnotapplywith--rl-from"),
    (["--target", "foo"], "--targetmustbe'set'or'choice',not'foo'"),
    (["--since", "7d"], "--sinceapplieswith--from-archiveonly"),
    (["--from-archive", "--since", "yesterday"], "--sincetakesanage(90m,36h,7d,2w)oratime"),
    (["--from-archive", "--since", "2999-01-01"], "--since2999-01-01isstilltocome"),
    (["--expert", "bogus"], "--expert'bogus'isnotapolicy"),
    (["--stability", "-1"], "--stabilitymustbeatleast0"),
    (["--stability", "0.5", "--transition-weight", "0"], "give--transition-weight>0sothatTistrained"),
    (["--delta-weight", "0.1", "--transition-weight", "0"], "give--transition-weight>0sothatTistrained"),
])  # fmt: skip
def test_train_refuses_options_it_would_ignore_or_could_not_use(tmp_path: Path, args: list[str], says: str) -> None:
    """(Found by review: --rl-from dropped every imitation and architecture option, --from-archive the fill's,
    --target foo trained with 'set', and --expert bogus / --stability -1 ended in a traceback mid-run.)"""
    r = runner.invoke(_app(), ["train", *args, "--no-promote", "--out", str(tmp_path / "m"),
                               "--archive", f"chdb://{tmp_path / 'a'}"])  # fmt: skip
    assert r.exit_code == 2 and says in _flat(r.output), r.output
    assert not (tmp_path / "m").exists()


def test_archive_name_never_shows_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from ops.cli.db import WorkerSqlClient
    from ops.cli.models import archive_name
    from streams.settings import Settings

    assert archive_name(SimpleNamespace(dsn="https://analyst:s3cret@ch.internal:8443/semsched")) == \
        "https://analyst:***@ch.internal:8443/semsched"
    monkeypatch.setenv("SEMSCHED_CLICKHOUSE_URL", "http://analyst:s3cret@ch.internal:8123/semsched")
    worker = WorkerSqlClient(Settings())
    named = archive_name(worker)
    assert "s3cret" not in named and "analyst:***@ch.internal:8123/semsched" in named and worker.dsn in named


def test_train_from_archive_records_the_archive_without_its_password(dsn: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: ``train.json`` (and so ``model_versions``) held the archive's DSN as given, password and all."""
    import ops.cli.models as cli_models

    class WithPassword:  # the chdb archive, under a server DSN with a password (no ClickHouse server here)
        def __init__(self, inner) -> None:  # noqa: ANN001
            self.inner, self.dsn = inner, "https://analyst:s3cret@ch.internal:8443/semsched"

        def __getattr__(self, name: str):  # noqa: ANN204
            return getattr(self.inner, name)

    real = cli_models.archive_client
    monkeypatch.setattr(cli_models, "archive_client", lambda archive, write: WithPassword(real(archive, write=write)))
    models = tmp_path / "models"
    r = runner.invoke(_app(), ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(models),
                               "--epochs", "1", "--hidden", "8", "--text-dim", "8", "--version", "arch-pw"])  # fmt: skip
    assert r.exit_code == 0, r.output
    recorded = (models / "arch-pw" / "train.json").read_text()
    assert "s3cret" not in recorded
    assert json.loads(recorded)["archive"] == "https://analyst:***@ch.internal:8443/semsched"


def test_train_from_a_worker_that_does_not_answer_in_time_is_one_line_and_exit_1(dsn: str, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: reading the archive through a busy worker ended in a traceback (WorkerBusy)."""
    import storage.queries.training_events as queries
    from ops.cli.db import WorkerBusy

    def busy(client, since=None):  # noqa: ANN001, ANN202
        raise WorkerBusy("the worker on port 6066 did not answer within 600 s")

    monkeypatch.setattr(queries, "training_events", busy)
    r = runner.invoke(_app(), ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(tmp_path / "m")])
    assert r.exit_code == 1 and "cannotreadthearchive:theworkeronport6066didnotanswer" in _flat(r.output), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_train_from_archive_imitates_the_deciders_it_is_told_and_records_them(dsn: str, tmp_path: Path) -> None:
    """Found by review: the command imitated every decider mixed (heuristics, the serving model's own
    decisions, the fallback's), with no way to choose, and its train.json left out what it sampled."""
    app, models = _app(), tmp_path / "models"
    base = ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(models), "--epochs", "1",
            "--hidden", "8", "--text-dim", "8"]  # fmt: skip
    r = runner.invoke(app, [*base, "--imitate", "fgd", "--version", "only-fgd"])  # the archive's decider: best-fit
    assert r.exit_code == 1 and "thearchivehasnousableplaceddecisions" in _flat(r.output), r.output
    r = runner.invoke(app, [*base, "--imitate", "best-fit", "--version", "best-fit-only"])
    assert r.exit_code == 0, r.output
    info = json.loads((models / "best-fit-only" / "train.json").read_text())
    assert info["policies"] == ["best-fit"] and info["expert"] == "best-fit"
    assert info["max_samples"] == 2000 and info["min_feasible"] == 2 and info["imitated_model_versions"] == {}
    assert info["warning"] is None and "warning:" not in r.output  # the rebuilt states are the worker's here
    r = runner.invoke(app, ["train", "--imitate", "fgd", "--out", str(models)])
    assert r.exit_code == 2 and "--imitateapplieswith--from-archiveonly" in _flat(r.output), r.output


def test_train_from_archive_warns_when_the_rebuilt_state_drops_more_decisions_than_it_keeps(dsn: str,
                                                                                          tmp_path: Path) -> None:  # fmt: skip
    """Found by review: node churn (the replay takes each node's latest report from the start) dropped most
    decisions, said only in the printed counts."""
    from scheduling.events import NodeTelemetry
    from tests.inference.training.training_helpers import at, cluster_nodes

    gpu_nodes = [n for n in cluster_nodes() if n.num_gpu]
    later = [NodeTelemetry(event_id=f"shrunk-{n.node_id}", event_time=at(10_000), node_id=n.node_id, source="inventory",
                           cpu_milli=n.cpu_milli, memory_mib=n.memory_mib, num_gpu=0)
             for n in gpu_nodes[: max(1, (2 * len(gpu_nodes)) // 3)]]  # fmt: skip
    ArchiveWriter(get_client(dsn)).write("nodes_telemetry", later, [(0, 1000 + i) for i in range(len(later))])
    r = runner.invoke(_app(), ["train", "--from-archive", "--no-promote", "--archive", dsn, "--out", str(tmp_path / "m"),
                               "--epochs", "1", "--hidden", "8", "--text-dim", "8", "--version", "churned"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "warning:" in r.output and "GPUsthenodenolongerhas" in _flat(r.output), r.output
    info = json.loads((tmp_path / "m" / "churned" / "train.json").read_text())
    assert info["warning"] and info["reconstruction"]["skipped"]["GPUs the node no longer has"] > \
        info["reconstruction"]["demonstrations"]
