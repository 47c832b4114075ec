"""``streams/model_status.py``: the worker says when its steps start and stop falling back."""

from __future__ import annotations

import logging

from inference.prepared_step import StepStatus
from streams.model_status import ModelStatus


class Policy:
    name = "learned"
    fallback_name = "fgd"
    last_step = StepStatus("triton", "v1", False, "")


def test_a_change_between_model_and_fallback_is_logged_once_each_way(caplog) -> None:  # type: ignore[no-untyped-def]
    policy = Policy()
    status = ModelStatus(policy)
    assert status.as_dict()["fallback"] is None
    with caplog.at_level(logging.WARNING, logger="semsched.model"):
        status.observe()  # the model decides: nothing to say
        assert caplog.records == [] and status.as_dict()["fallback"] is False
        policy.last_step = StepStatus("triton", "v1", True, "triton policy: UNAVAILABLE")
        status.observe()
        policy.last_step = StepStatus("triton", "v1", True, "triton policy: DEADLINE_EXCEEDED")
        status.observe()  # still falling back, another reason: not again
        assert [r.getMessage() for r in caplog.records] == [
            "learned: steps now decided by fgd, not the model (triton): triton policy: UNAVAILABLE"]
        assert status.as_dict()["reason"] == "triton policy: DEADLINE_EXCEEDED"
        policy.last_step = StepStatus("triton", "v2", False, "")
        status.observe()
        assert caplog.records[-1].getMessage() == "learned: the model decides again (triton, version v2)"
    assert len(caplog.records) == 2
    assert status.as_dict() | {"since": None} == {"fallback": False, "since": None, "reason": "", "version": "v2",
                                                   "changes": 3}  # fmt: skip


def test_a_worker_without_a_model_says_so_at_its_first_step(caplog) -> None:  # type: ignore[no-untyped-def]
    policy = Policy()
    policy.last_step = StepStatus("", None, True, "FileNotFoundError: models/latest")
    with caplog.at_level(logging.WARNING, logger="semsched.model"):
        ModelStatus(policy).observe()
    assert [r.getMessage() for r in caplog.records] == [
        "learned: steps now decided by fgd, not the model (no backend): FileNotFoundError: models/latest"]
