"""streams/kafka_logs.py: aiokafka's retried coordinator lookups are warnings, not errors, and the same
warning again within 10 s is held back and counted."""

from __future__ import annotations

import logging

import aiokafka.errors as Errors  # noqa: N812 (aiokafka's own alias)
import pytest

from streams.kafka_logs import COORDINATOR_LOGGER, CollapsedRepeats, tame_kafka_client_logs


def test_a_retried_coordinator_lookup_is_a_warning_and_one_that_is_not_retried_stays_an_error(
        caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    from aiokafka.consumer import group_coordinator

    assert group_coordinator.log.name == COORDINATOR_LOGGER  # the logger aiokafka writes the line to
    tame_kafka_client_logs()
    tame_kafka_client_logs()  # installed once
    assert sorted(type(f).__name__ for f in group_coordinator.log.filters) == ["CollapsedRepeats",
                                                                              "RetriedCoordinatorLookup"]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger=COORDINATOR_LOGGER):
        # aiokafka's own call (ensure_coordinator_known), a fresh broker's first answer:
        group_coordinator.log.error("Group Coordinator Request failed: %s", Errors.CoordinatorNotAvailableError())
        group_coordinator.log.error("Group Coordinator Request failed: %s", Errors.UnknownError())  # not retried
    first, second = caplog.records
    assert first.levelname == "WARNING" and "retrying" in first.getMessage()
    assert "CoordinatorNotAvailable" in first.getMessage()
    assert second.levelname == "ERROR" and "retrying" not in second.getMessage()


def test_the_same_line_within_the_interval_is_held_back_and_counted_in_the_next_one_let_through() -> None:
    now = [0.0]
    f = CollapsedRepeats(every_s=10.0, clock=lambda: now[0])

    def line(msg: str, *args: object, level: int = logging.ERROR, exc: bool = False) -> logging.LogRecord:
        info = (RuntimeError, RuntimeError("boom"), None) if exc else None
        return logging.LogRecord("aiokafka.client", level, __file__, 1, msg, args, info)

    shown = []
    for t in (0.0, 0.1, 0.2, 5.0, 9.9):  # a failed update every so often
        now[0] = t
        shown += [r.getMessage() for r in [line("Unable to update metadata from %s", [1])] if f.filter(r)]
    assert shown == ["Unable to update metadata from [1]"]
    # another node, another error, a traceback, a debug line: let through at once
    assert f.filter(line("Unable to update metadata from %s", [2]))
    assert f.filter(line("Unexpected error in fetcher routine", exc=True))
    assert f.filter(line("Unexpected error in fetcher routine", exc=True))
    debug = line("Received cluster metadata: %s", "x", level=logging.DEBUG)
    assert f.filter(debug) and f.filter(debug)
    now[0] = 10.0
    again = line("Unable to update metadata from %s", [1])
    assert f.filter(again)
    assert again.getMessage() == ("Unable to update metadata from [1] (and 4 more like it in the 10 s before, "
                                  "not logged)")  # fmt: skip


def test_lines_that_name_changing_things_are_not_remembered_for_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    import streams.kafka_logs

    monkeypatch.setattr(streams.kafka_logs, "MAX_KINDS", 10)
    now = [0.0]
    f = CollapsedRepeats(every_s=10.0, clock=lambda: now[0])
    for i in range(100):
        now[0] = i * 1.0
        f.filter(logging.LogRecord("aiokafka.fetcher", logging.WARNING, __file__, 1, "offset %s out of range", (i,), None))
    assert len(f._shown) <= 11


def test_installed_on_aiokafka_s_client_logger(caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import client

    tame_kafka_client_logs()
    with caplog.at_level(logging.WARNING, logger="aiokafka.client"):
        for _ in range(50):
            client.log.error("Unable to update metadata from %s", [1])
    assert len(caplog.records) <= 1  # (none when an earlier test's line of this kind is under 10 s old)


def test_the_count_of_a_line_that_stopped_repeating_is_told_once_its_interval_is_over() -> None:
    """Before, it went untold: an outage's last failures were held back and never logged, and the log's last
    line of it came up to 10 s before its end."""
    now = [0.0]
    f = CollapsedRepeats(every_s=10.0, clock=lambda: now[0])
    for t in (0.0, 1.0, 2.0, 3.0):  # the broker comes back after 3 s: no more like it
        now[0] = t
        f.filter(logging.LogRecord("aiokafka.conn", logging.ERROR, __file__, 1, "Unable connect to %s", ("n1",), None))
    now[0] = 9.0
    assert f.untold() == []  # within its interval: the next one let through would say so
    now[0] = 12.0
    assert f.untold() == [("aiokafka.conn", logging.ERROR, "Unable connect to n1", 3, 12.0)]
    assert f.untold() == []  # told once


def test_tell_untold_repeats_logs_them_on_their_own_logger(caplog: pytest.LogCaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from aiokafka import conn

    import streams.kafka_logs as kafka_logs

    tame_kafka_client_logs()
    [collapsed] = [f for lg, f in kafka_logs._COLLAPSED if lg is conn.log]
    now = [1000.0]
    monkeypatch.setattr(collapsed, "clock", lambda: now[0])
    with caplog.at_level(logging.WARNING, logger=conn.log.name):
        for _ in range(5):
            conn.log.error("Unable connect to %s", "node-untold")
        now[0] += 11
        assert kafka_logs.tell_untold_repeats() >= 1
    told = [r.getMessage() for r in caplog.records if "node-untold" in r.getMessage()]
    assert told == ["Unable connect to node-untold",
                    "Unable connect to node-untold (and 4 more like it in the 11 s since, not logged)"]  # fmt: skip
