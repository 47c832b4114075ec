"""A worker's step past its hold (``SEMSCHED_STEP_HOLD``) leaves the jobs it did not consider to the next
step, which it asks for at once (streams/loop.py): the step runs on the event loop, and 2,000 placements
held it ~2.7 s (``semsched bench triton --burst``)."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import scheduling.assign as assign
from scheduling.events import JobSubmitted, NodeTelemetry, partition_for
from streams import telemetry
from streams.state import on_submitted
from tests.scheduling.sched_builders import Ticking
from tests.streams.loop_helpers import T0, stood_in_worker


@pytest.mark.parametrize("debounce", [0.05, -1.0])  # (-1: steps on the clock only, for arrivals; found by review)
def test_the_jobs_a_held_step_did_not_consider_stay_pending_and_the_next_step_comes_soon(monkeypatch, debounce) -> None:
    w, _ = stood_in_worker(step_hold_s=0.25, event_debounce_s=debounce)
    loop = w.loop  # type: ignore[attr-defined]
    part = partition_for("c1", 4)
    w.nodes.data["n1"] = NodeTelemetry(node_id="n1", cluster="c1", event_time=T0, cpu_milli=64000,
                                       memory_mib=65536, num_gpu=8, gpu_model="A100").model_dump(mode="json")  # fmt: skip
    for i in range(6):
        submitted = JobSubmitted(job_id=f"j{i}", event_id=f"ev-{i}", event_time=T0, cluster="c1", cpu_milli=1000,
                                 memory_mib=1024, num_gpu=1, gpu_milli=1000)  # fmt: skip
        w.apply(on_submitted(submitted, None, 0.0), partition=part)

    async def step() -> None:
        monkeypatch.setattr(assign, "_now", Ticking())
        loop.woken.clear()
        await loop.tick()

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(provider, MeterProvider())
    try:
        asyncio.run(step())
    finally:
        telemetry.shutdown()
    assert set(w.running) == {"j0", "j1", "j2"} and set(w.pending) == {"j3", "j4", "j5"}
    assert loop.stats["deferred"] == 3 and loop.woken.is_set()  # the next step without waiting for the clock
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "schedule step"]
    assert span.attributes["semsched.deferred"] == 3 and span.attributes["semsched.pending"] == 6
    asyncio.run(step())
    assert set(w.running) == {f"j{i}" for i in range(6)} and not w.pending and loop.stats["deferred"] == 3
    assert not loop.woken.is_set()
