"""Run-time settings, from the environment (``SEMSCHED_*``). One place; every process
(worker, agents, replay, CLI, tests) reads the same names."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

TOPICS = ("jobs.submitted", "nodes.telemetry", "jobs.lifecycle", "decisions", "actions", "deadletter")


def _env(name: str, default: str) -> str:
    return os.environ.get(f"SEMSCHED_{name}", default)


class Settings(BaseModel):
    bootstrap: str = Field(default_factory=lambda: _env("BOOTSTRAP", "127.0.0.1:19092"))
    topic_prefix: str = Field(default_factory=lambda: _env("TOPIC_PREFIX", "semsched."))
    partitions: int = Field(default_factory=lambda: int(_env("PARTITIONS", "4")))
    state_dir: Path = Field(default_factory=lambda: Path(_env("STATE_DIR", ".state")).resolve())
    clickhouse_url: str = Field(default_factory=lambda: _env("CLICKHOUSE_URL", ""))
    policy: str = Field(default_factory=lambda: _env("POLICY", "best-fit"))
    # the heuristic placement that decides for the learned policy when its model is absent, slow or
    # down (streams/loop.py passes it to ``learned`` or ``<ordering>+learned`` only)
    fallback_policy: str = Field(default_factory=lambda: _env("FALLBACK_POLICY", "fgd"), validate_default=True)
    step_s: float = Field(default_factory=lambda: float(_env("STEP", "1.0")))
    # a step also starts this long after a job arrives or resources free up (< 0: clock only)
    event_debounce_s: float = Field(default_factory=lambda: float(_env("EVENT_DEBOUNCE", "0.05")))
    confirm_timeout_s: float = Field(default_factory=lambda: float(_env("CONFIRM_TIMEOUT", "30")))
    max_retries: int = Field(default_factory=lambda: int(_env("MAX_RETRIES", "3")))
    # how far behind the committed offsets a worker newly assigned a partition reads its input logs back,
    # messages per partition and topic (streams/log_readback.py; 0 = from the start): lost writes are the last few
    restore_window: int = Field(default_factory=lambda: int(_env("RESTORE_WINDOW", "10000")), ge=0)
    max_message_bytes: int = Field(default_factory=lambda: int(_env("MAX_MESSAGE_BYTES", str(256 * 1024))))
    web_port: int = Field(default_factory=lambda: int(_env("WEB_PORT", "6066")))
    archive_batch_rows: int = Field(default_factory=lambda: int(_env("ARCHIVE_BATCH_ROWS", "5000")))
    session_timeout_s: float = Field(default_factory=lambda: float(_env("SESSION_TIMEOUT", "10")))
    archive_flush_s: float = Field(default_factory=lambda: float(_env("ARCHIVE_FLUSH", "1.0")))
    # OpenTelemetry spans and metrics (streams/telemetry): console | otlp | none | file:DIR. The
    # OTLP endpoint, sampler, batch sizes and metric interval come from the standard OTEL_* names.
    otel_exporter: str = Field(default_factory=lambda: _env("OTEL_EXPORTER", "console"))

    @field_validator("fallback_policy")
    @classmethod
    def _a_heuristic_placement(cls, name: str) -> str:
        choices = fallback_choices()
        if name not in choices:
            raise ValueError(f"SEMSCHED_FALLBACK_POLICY must be a heuristic placement policy, one of "
                             f"{', '.join(choices)}; not {name!r}")  # fmt: skip
        return name

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"

    @property
    def clickhouse_dsn(self) -> str:
        """The archive: a ClickHouse server URL if set, else embedded chdb under the state dir."""
        return self.clickhouse_url or f"chdb://{self.state_dir / 'chdb'}"


def fallback_choices() -> list[str]:
    """The placements the learned policy can fall back to: every registered one but the learned ones
    (the fallback decides alone, so an ordering, ``<ordering>+<placement>``, would not apply)."""
    from inference.policy import LEARNED_PLACEMENTS
    from scheduling.policies import available_policies

    return [name for name in available_policies() if name not in LEARNED_PLACEMENTS]


def get_settings() -> Settings:
    return Settings()
