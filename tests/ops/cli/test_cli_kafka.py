"""`semsched kafka start|stop` (ops/cli/kafka.py) when the broker fails: what they print, without a
broker (the broker itself: tests/ops/kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.cli.main import app
from ops.kafka.broker import KafkaBroker, KafkaBrokerError

runner = CliRunner(env={"COLUMNS": "300"})
LOG_LINE = "[2026-12-03 10:00:00] ERROR bind failed [/127.0.0.1:19092] Address already in use"


def test_a_start_failure_prints_the_broker_log_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: the log tail went into the panel as rich markup, and a log line with "[/…]"
    raised a MarkupError (a traceback instead of the reason)."""

    def fails(self: KafkaBroker, timeout: float = 60) -> None:
        raise KafkaBrokerError(f"Kafka broker exited during startup (exit 1).\n--- broker.log (tail) ---\n{LOG_LINE}")

    monkeypatch.setattr(KafkaBroker, "jars_ready", lambda self: True)
    monkeypatch.setattr(KafkaBroker, "start", fails)
    result = runner.invoke(app, ["kafka", "start", "--port", "39092", "-d", str(tmp_path / "kafka")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    assert "kafka start failed" in result.output and LOG_LINE in result.output, result.output


def test_a_stop_that_cannot_take_the_broker_lock_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def waits(self: KafkaBroker, timeout: float = 20, lock_wait: float = 120) -> bool:
        raise KafkaBrokerError(f"another process (pid 7) is starting or stopping the broker of {self.data_dir} [/x]")

    monkeypatch.setattr(KafkaBroker, "stop", waits)
    result = runner.invoke(app, ["kafka", "stop", "-d", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "kafka stop failed: another process (pid 7) is starting or stopping the broker of" in result.output
    assert "[/x]" in result.output


def test_jars_resolves_whatever_the_default_data_dirs_properties_hold(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: `kafka jars` (the first step of `make demo` and `make test`) built a broker on the default
    data dir just to resolve the jars, and a bad server.properties there ended it in a traceback."""
    from ops.kafka import jars

    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "server.properties").write_bytes(b"log.dirs=\xff\xfe\n")
    monkeypatch.setenv("SEMSCHED_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(jars, "ensure_jars", lambda lib, pom, timeout=900: tmp_path / "lib")
    result = runner.invoke(app, ["kafka", "jars"])
    assert result.exit_code == 0 and "Kafka jars ready" in result.output, result.output


def test_stop_refuses_a_port_its_data_dirs_broker_does_not_listen_on(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Found by review: `kafka stop --port P` took P and stopped the data dir's broker, whatever its port."""
    stopped: list[Path] = []
    monkeypatch.setattr(KafkaBroker, "stop", lambda self, timeout=20, lock_wait=120: stopped.append(self.data_dir))
    (tmp_path / "server.properties").write_text("listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n")
    result = runner.invoke(app, ["kafka", "stop", "--port", "29092", "-d", str(tmp_path)])
    assert result.exit_code == 2 and stopped == [], result.output
    assert "listens on port 19092, not 29092" in result.output
    result = runner.invoke(app, ["kafka", "stop", "--port", "19092", "-d", str(tmp_path)])
    assert result.exit_code == 0 and stopped == [tmp_path], result.output
