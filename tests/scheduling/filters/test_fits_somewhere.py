"""FitsSomewhere: the jobs the default filters let onto some node now, once per shape a step."""

from collections.abc import Iterator

import pytest
from sched_builders import job, node, snap

import scheduling.filters.fits_somewhere as fits_module
from scheduling.filters.fits_somewhere import FitsSomewhere


def test_first_keeps_the_order_skips_what_fits_nowhere_and_reads_no_further_than_needed():
    s = snap(node("a", gpus=2), node("b", gpus=1, gpu_alloc=(1000,)))
    jobs = [job("two", gpus=2), job("three", gpus=3), job("one", gpus=1), job("cpu"), job("one-more", gpus=1)]
    read: list[str] = []

    def stream() -> Iterator:
        for j in jobs:
            read.append(j.job_id)
            yield j

    got = FitsSomewhere().first(stream(), s, 3)
    assert [j.job_id for j in got] == ["two", "one", "cpu"]  # "three": more GPUs than any node has free
    assert read == ["two", "three", "one", "cpu"]  # the fifth is not read
    assert FitsSomewhere().first(jobs, s, 0) == []


def test_a_shape_that_fits_nowhere_is_asked_once_a_step_one_that_fits_again(monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    real = fits_module.run_filters

    def counting(j, s, *a, **kw):  # type: ignore[no-untyped-def]
        calls.append(j.job_id)
        return real(j, s, *a, **kw)

    monkeypatch.setattr(fits_module, "run_filters", counting)
    s = snap(node("a", gpus=1))
    step = FitsSomewhere()
    assert [j.job_id for j in step.first([job("big", gpus=2), job("big2", gpus=2), job("x", gpus=1)], s, 5)] == ["x"]
    assert calls == ["big", "x"]  # "big2" has big's shape
    s.reserve(0, job("x", gpus=1), (0,))  # the step placed x: the GPU is gone
    assert step.first([job("big3", gpus=2), job("y", gpus=1)], s, 5) == []
    assert calls == ["big", "x", "y"]  # the two-GPU shape was not asked again; the one-GPU shape was, and is full now
