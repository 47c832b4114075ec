"""streams/kafka_logs.py: aiokafka's retried coordinator lookups are warnings, not errors."""

from __future__ import annotations

import logging

import aiokafka.errors as Errors  # noqa: N812 (aiokafka's own alias)
import pytest

from streams.kafka_logs import COORDINATOR_LOGGER, quiet_retried_coordinator_lookups


def test_a_retried_coordinator_lookup_is_a_warning_and_one_that_is_not_retried_stays_an_error(
        caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    from aiokafka.consumer import group_coordinator

    assert group_coordinator.log.name == COORDINATOR_LOGGER  # the logger aiokafka writes the line to
    quiet_retried_coordinator_lookups()
    quiet_retried_coordinator_lookups()  # installed once
    assert len(group_coordinator.log.filters) == 1
    with caplog.at_level(logging.WARNING, logger=COORDINATOR_LOGGER):
        # aiokafka's own call (ensure_coordinator_known), a fresh broker's first answer:
        group_coordinator.log.error("Group Coordinator Request failed: %s", Errors.CoordinatorNotAvailableError())
        group_coordinator.log.error("Group Coordinator Request failed: %s", Errors.UnknownError())  # not retried
    first, second = caplog.records
    assert first.levelname == "WARNING" and "retrying" in first.getMessage()
    assert "CoordinatorNotAvailable" in first.getMessage()
    assert second.levelname == "ERROR" and "retrying" not in second.getMessage()
