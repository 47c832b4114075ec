"""Run-time settings, from the environment (``SEMSCHED_*``). One place; every process
(worker, agents, replay, CLI, tests) reads the same names."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationInfo, field_validator

T = TypeVar("T", int, float)
AGENT_REPORT_EVERY_S = 10.0  # an agent reports every node at least this often (streams/silent_nodes.py, README)
TOPICS = ("jobs.submitted", "nodes.telemetry", "jobs.lifecycle", "decisions", "actions", "deadletter")


class SettingsError(ValueError):
    """A ``SEMSCHED_*`` variable that cannot be read; the message names it (the CLI prints it, exit 2)."""


def _env(name: str, default: str) -> str:
    return os.environ.get(f"SEMSCHED_{name}", default)


def _env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _env_parsed(name, default, int, "an integer")
    if minimum is not None and value < minimum:
        raise SettingsError(f"SEMSCHED_{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"SEMSCHED_{name} must be at most {maximum}, not {value}")
    return value


def _env_float(name: str, default: float, minimum: float | None = None, maximum: float | None = None) -> float:
    value = _env_parsed(name, default, float, "a number")
    if math.isnan(value):
        raise SettingsError(f"SEMSCHED_{name} must be a number, not nan")
    if minimum is not None and value < minimum:
        raise SettingsError(f"SEMSCHED_{name} must be at least {minimum:g}, not {value:g}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"SEMSCHED_{name} must be at most {maximum:g}, not {value:g}")
    return value


def _env_positive(name: str, default: float) -> float:
    """A duration or a rate: a finite number > 0 (SEMSCHED_STEP=-1 or nan was taken as it came)."""
    value = _env_float(name, default)
    if not 0 < value < math.inf:
        raise SettingsError(f"SEMSCHED_{name} must be a finite number > 0, not {value:g}")
    return value


def _env_parsed(name: str, default: T, parse: Callable[[str], T], what: str) -> T:
    raw = _env(name, str(default))
    try:
        return parse(raw)
    except ValueError:
        raise SettingsError(f"SEMSCHED_{name} must be {what}, not {raw!r}") from None


class Settings(BaseModel):
    bootstrap: str = Field(default_factory=lambda: _env("BOOTSTRAP", "127.0.0.1:19092"))
    topic_prefix: str = Field(default_factory=lambda: _env("TOPIC_PREFIX", "semsched."))
    partitions: int = Field(default_factory=lambda: _env_int("PARTITIONS", 4, minimum=1), ge=1)
    # the replicas of each topic semsched creates (streams/topics.py); min.insync.replicas is the broker's
    replication_factor: int = Field(default_factory=lambda: _env_int("REPLICATION_FACTOR", 1, minimum=1), ge=1)
    state_dir: Path = Field(default_factory=lambda: Path(_env("STATE_DIR", ".state")).resolve())
    clickhouse_url: str = Field(default_factory=lambda: _env("CLICKHOUSE_URL", ""))
    policy: str = Field(default_factory=lambda: _env("POLICY", "best-fit"))
    # the heuristic placement that decides for the learned policy when its model is absent, slow or
    # down (streams/loop.py passes it to ``learned`` or ``<ordering>+learned`` only)
    fallback_policy: str = Field(default_factory=lambda: _env("FALLBACK_POLICY", "fgd"), validate_default=True)
    step_s: float = Field(default_factory=lambda: _env_positive("STEP", 1.0))
    # a step also starts this long after a job arrives or resources free up (< 0: clock only)
    # (seconds: at most the step, whose clock starts a step anyway; found by review: inf slept for ever, and
    # 50 read as "50 ms" from the README slept 50 s before every arrival's step)
    event_debounce_s: float = Field(default_factory=lambda data: _env_float("EVENT_DEBOUNCE", min(0.05, data["step_s"])),
                                    validate_default=True)  # fmt: skip  (the default within any step)
    # once a step has spent this long on the placements it made, it leaves the jobs not considered yet to the
    # next step, SEMSCHED_EVENT_DEBOUNCE later (scheduling.assign.schedule_step's hold_s): the step runs on the
    # worker's event loop (heartbeats, agents, /status wait meanwhile; 2,000 placements held it ~2.7 s,
    # `semsched bench triton --burst`); 0: no hold
    step_hold_s: float = Field(default_factory=lambda: _env_float("STEP_HOLD", 0.5, minimum=0), ge=0)
    confirm_timeout_s: float = Field(default_factory=lambda: _env_positive("CONFIRM_TIMEOUT", 30))
    max_retries: int = Field(default_factory=lambda: _env_int("MAX_RETRIES", 3, minimum=0))
    # the placements on a node unhealthy this long are preempted and re-queued (streams/lost_nodes.py;
    # 0: at once; < 0: never)
    node_lost_s: float = Field(default_factory=lambda: _env_float("NODE_LOST", 60))
    # a node its agent has reported on that is not heard from again for this long is marked unhealthy by
    # the worker, which node_lost_s then acts on (streams/silent_nodes.py; agents report every node at
    # least every 10 s; 0: never)
    node_silent_s: float = Field(default_factory=lambda: _env_float("NODE_SILENT", 40, minimum=0), ge=0,
                                 validate_default=True)

    @field_validator("node_silent_s")
    @classmethod
    def _longer_than_the_agents_interval(cls, v: float) -> float:
        if 0 < v <= AGENT_REPORT_EVERY_S:  # a live idle node would be marked between two of its reports
            raise ValueError(f"SEMSCHED_NODE_SILENT must be 0 (never) or more than the agents' report interval "
                             f"({AGENT_REPORT_EVERY_S:g} s), not {v:g}")
        return v
    # a job whose DAG parent this worker has never seen (not pending, running or done in its cluster)
    # is rejected this long after its submission (0: it waits for the parent however long it takes)
    # a telemetry report or a submission whose event_time is further ahead of the worker's clock than
    # this is dead-lettered (a report from a clock that jumped ahead would otherwise hide every later
    # report of its node until that time: streams/agents.py)
    max_clock_skew_s: float = Field(default_factory=lambda: _env_float("MAX_CLOCK_SKEW", 300, minimum=0), ge=0)
    dag_parent_wait_s: float = Field(default_factory=lambda: _env_float("DAG_PARENT_WAIT", 600, minimum=0), ge=0)
    # a finished or rejected job is forgotten this long after it ended (streams/done_retention.py: the done
    # table, and its changelog a restarted worker reads whole, stay bounded); 0 = kept for ever
    done_retention_s: float = Field(default_factory=lambda: _env_float("DONE_RETENTION", 7 * 86400, minimum=0), ge=0)
    # how far behind the committed offsets a worker newly assigned a partition reads its input logs back,
    # messages per partition and topic (streams/log_readback.py; 0 = from the start): lost writes are the last few
    restore_window: int = Field(default_factory=lambda: _env_int("RESTORE_WINDOW", 10000, minimum=0), ge=0)
    # the latest finished jobs of the archive the worker's duration estimate learns from at start
    # (streams/duration_warm_up.py; 0 = none: it starts from what its model holds, or cold)
    duration_warm_up: int = Field(default_factory=lambda: _env_int("DURATION_WARM_UP", 20000, minimum=0), ge=0)
    # how often the scheduling loop's kept cluster snapshot is checked against one built from the tables,
    # seconds (streams/snapshot_cache.py; 0 = at every step)
    snapshot_verify_s: float = Field(default_factory=lambda: _env_float("SNAPSHOT_VERIFY", 60, minimum=0), ge=0)
    max_message_bytes: int = Field(default_factory=lambda: _env_int("MAX_MESSAGE_BYTES", 256 * 1024, minimum=1024))
    web_port: int = Field(default_factory=lambda: _env_int("WEB_PORT", 6066, minimum=0, maximum=65535))
    archive_batch_rows: int = Field(default_factory=lambda: _env_int("ARCHIVE_BATCH_ROWS", 5000, minimum=1))
    # the worker's Kafka group session (s): within the broker's default group.min/max.session.timeout.ms,
    # 6-1800 s (found by review: 3 was taken, then the broker refused the join, fatal to the consumer)
    session_timeout_s: float = Field(default_factory=lambda: _env_float("SESSION_TIMEOUT", 10, minimum=6, maximum=1800))
    archive_flush_s: float = Field(default_factory=lambda: _env_positive("ARCHIVE_FLUSH", 1.0))
    # a worker or the agents told to stop (SIGTERM, SIGINT) exit 1 this long after, however far their
    # clean stop got (streams/stop_deadline.py: one whose broker is gone was still stopping 200 s later; 0 = never)
    stop_timeout_s: float = Field(default_factory=lambda: _env_float("STOP_TIMEOUT", 30, minimum=0), ge=0)
    # how long the broker may hold the archiver's fetch for more data (ms; streams/archiver.py): at
    # least 10 (with none it would answer at once, and the archiver would poll in a loop), at most
    # 5,000 (the archive would trail the topics by that much)
    archive_fetch_wait_ms: int = Field(default_factory=lambda: _env_int("ARCHIVE_FETCH_WAIT", 250, minimum=10,
                                                                        maximum=5000), ge=10, le=5000)  # fmt: skip
    # OpenTelemetry spans and metrics (streams/telemetry): console | otlp | none | file:DIR. The
    # OTLP endpoint, sampler, batch sizes and metric interval come from the standard OTEL_* names.
    otel_exporter: str = Field(default_factory=lambda: _env("OTEL_EXPORTER", "console"))

    @field_validator("event_debounce_s")
    @classmethod
    def _a_debounce_within_a_step(cls, v: float, info: ValidationInfo) -> float:
        step = info.data.get("step_s", math.inf)
        if v >= 0 and not v <= step:
            raise ValueError(f"SEMSCHED_EVENT_DEBOUNCE must be at most SEMSCHED_STEP ({step:g} s; seconds, "
                             f"< 0: the clock only), not {v:g}")  # fmt: skip
        return v

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
    (the fallback decides alone, so an ordering, ``<ordering>+<placement>``, would not apply). The
    learned ones are registered only once :mod:`inference` is imported, and it is not imported here:
    it brings torch (found by review: every process that read its settings, the agents and ``sql``
    too, loaded torch, 1.5 s and 800 MB, to check one name)."""
    from scheduling.policies import available_policies

    learned = getattr(sys.modules.get("inference.policy"), "LEARNED_PLACEMENTS", frozenset())
    return [name for name in available_policies() if name not in learned]


def get_settings() -> Settings:
    return Settings()


def no_broker(command: str, bootstrap: str, error: Exception) -> str:
    """What ``semsched <command>`` says when no broker answers at ``bootstrap``."""
    return (f"semsched {command}: no Kafka broker answers at {bootstrap} ({error}): start one with "
            "`semsched kafka start`, or set SEMSCHED_BOOTSTRAP")
