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
