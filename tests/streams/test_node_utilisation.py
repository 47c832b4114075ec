"""The nodes' hopping-window utilisation as a step reads it (``streams/node_utilisation.py``),
fed through the worker's real telemetry agent in Faust's broker-free test mode."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from test_faust_agents import drive, put, telemetry, worker  # noqa: F401  (the fixture)

from scheduling.node import NodeView
from streams.app import Worker
from streams.node_utilisation import step_utilisation, window_means


async def test_a_step_reads_each_nodes_window_mean(worker) -> None:  # noqa: F811
    w: Worker = worker[0]
    now = datetime.now(UTC)
    reports = [("g1", dict(gpu_util=0.2, cpu_util=0.9)), ("g1", dict(gpu_util=0.6, cpu_util=0.9)),
               ("c1", dict(num_gpu=0, gpu_model=None, cpu_util=0.5, gpu_util=0.0))]  # fmt: skip
    async with drive(w, "nodes.telemetry") as a:
        for i, (node, kw) in enumerate(reports):
            ev = telemetry(node, at=now + timedelta(milliseconds=i), source="agent", **kw)
            await put(a, ev.to_bytes(), key=node.encode())
        inventory = telemetry("quiet", at=now, source="inventory")  # an inventory report is no measurement
        await put(a, inventory.to_bytes(), key=b"quiet")
    n, gpu, cpu = window_means(w, "g1")
    assert n == 2 and gpu == pytest.approx(0.4) and cpu == pytest.approx(0.9)
    views = [NodeView("g1", cpu_milli=64_000, memory_mib=256_000, num_gpu=4, gpu_model="A100"),
             NodeView("c1", cpu_milli=64_000, memory_mib=256_000),
             NodeView("quiet", cpu_milli=64_000, memory_mib=256_000, num_gpu=4, gpu_model="A100")]  # fmt: skip
    np.testing.assert_allclose(step_utilisation(w, views), [0.4, 0.5, 0.0], rtol=1e-6)
    assert window_means(w, "quiet") == (0, None, None)


async def test_the_window_holds_every_report_of_its_60_s(worker, monkeypatch) -> None:  # noqa: F811
    """Each hopping window sums its own reports: a report falls in two windows (60 s, every 30 s),
    and writing one window's sum into both overwrote the earlier window with the later's (it then
    held the last 0-30 s only)."""
    import math

    import faust.tables.base as faust_tables

    w: Worker = worker[0]
    b = math.floor(datetime.now(UTC).timestamp() / 30) * 30 - 600  # a window boundary, in the past
    async with drive(w, "nodes.telemetry") as a:  # every 5 s over [b - 30, b + 30): busy, then idle
        for t in range(b - 30, b + 30, 5):
            ev = telemetry("g1", at=datetime.fromtimestamp(t, UTC), source="agent",
                           gpu_util=1.0 if t < b else 0.0, cpu_util=0.5)  # fmt: skip
            await put(a, ev.to_bytes(), key=b"g1", timestamp=float(t))
    monkeypatch.setattr(faust_tables.time, "time", lambda: b + 29.0)  # read at b + 29: [b - 30, b + 30)
    assert window_means(w, "g1") == (12, pytest.approx(0.5), pytest.approx(0.5))


async def test_a_redelivered_report_is_counted_once(worker) -> None:  # noqa: F811
    w: Worker = worker[0]
    now = datetime.now(UTC)
    first = telemetry("g1", at=now, source="agent", gpu_util=0.9, cpu_util=0.9)
    second = telemetry("g1", at=now, source="agent", gpu_util=0.1, cpu_util=0.1)
    async with drive(w, "nodes.telemetry") as a:
        await put(a, first.to_bytes(), key=b"g1", offset=0)
        await put(a, second.to_bytes(), key=b"g1", offset=1)
        await put(a, second.to_bytes(), key=b"g1", offset=1)  # the latest again (a restart, a rebalance)
    assert window_means(w, "g1") == (2, pytest.approx(0.5), pytest.approx(0.5))
    assert w.counters.telemetry == 2 and w.counters.telemetry_late == 1


async def test_an_agents_report_is_heard_and_the_workers_mark_is_no_measurement(worker) -> None:  # noqa: F811
    """What ``streams/silent_nodes.py`` reads: when each node's agent was last heard, and how far the
    telemetry partitions were handled. The worker's own mark of a silent node (source ``worker``)
    is neither a sign of life nor a utilisation sample, and an agent's report after it supersedes it."""
    import time

    w: Worker = worker[0]
    now = datetime.now(UTC)
    async with drive(w, "nodes.telemetry") as a:
        await put(a, telemetry("inv", at=now, source="inventory").to_bytes(), key=b"inv", offset=0)
        before = time.monotonic()
        await put(a, telemetry("g1", at=now, source="agent", gpu_util=0.5).to_bytes(), key=b"g1", offset=1)
        heard = w.node_heard["g1"]
        mark = telemetry("g1", at=now + timedelta(milliseconds=1), source="worker", healthy=False, gpu_util=0.5)
        await put(a, mark.to_bytes(), key=b"g1", offset=2)
        assert w.nodes["g1"]["source"] == "worker" and w.node_heard["g1"] == heard
        await put(a, telemetry("g1", at=now + timedelta(seconds=1), source="agent").to_bytes(), key=b"g1", offset=3)
    assert "inv" not in w.node_heard and heard >= before and w.node_heard["g1"] > heard
    assert w.nodes["g1"]["source"] == "agent" and w.nodes["g1"]["healthy"]
    assert window_means(w, "g1")[0] == 2 and max(w.telemetry_offsets.values()) == 3
