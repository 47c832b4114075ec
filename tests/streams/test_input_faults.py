"""SEMSCHED_FAULT_DROP_INPUT: each listed record is lost once; a malformed entry is refused by name."""

from __future__ import annotations

import pytest

from streams.input_faults import ENV, InputFaults


def test_each_listed_record_is_dropped_once() -> None:
    f = InputFaults("jobs.submitted:7, jobs.lifecycle:0")
    assert not f.drop("jobs.submitted", 6)
    assert f.drop("jobs.submitted", 7) and not f.drop("jobs.submitted", 7)
    assert f.drop("jobs.lifecycle", 0) and f.dropped == 2
    assert not InputFaults("").drop("jobs.submitted", 0)


@pytest.mark.parametrize("spec", ["jobs.submitted", "jobs.submitted:x", ":3"])
def test_a_malformed_entry_names_the_variable_and_the_entry(spec: str) -> None:
    with pytest.raises(ValueError, match=f"{ENV}: .* is not TOPIC:OFFSET"):
        InputFaults(spec)
