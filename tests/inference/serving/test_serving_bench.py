"""`semsched bench triton` against the session's real tritonserver: the Triton call split into the
server's own work (timed on a twin of the served model) and the rest of the round trip."""

from __future__ import annotations

import numpy as np
from inference_helpers import pod_mix, small_snapshot


def test_bench_triton_splits_each_call_into_the_servers_work_and_the_round_trip(served):
    from inference.backends import InProcessBackend
    from inference.serving.client import TritonBackend
    from inference.serving.host import ModelHost
    from inference.serving.models import PolicyModel
    from ops.bench.triton import time_sizes

    local = InProcessBackend(served.latest)
    remote = TritonBackend(served.latest, url=served.url, deadline_ms=60_000)
    twin = PolicyModel(ModelHost(served.latest, watch_s=3600.0))
    snap = small_snapshot()
    try:  # every step's Triton scores are checked against in-process inside time_sizes
        rows, raw = time_sizes(local, remote, {snap.num_nodes: snap}, pod_mix(24), [6], repeat=3, deadline_ms=500.0,
                               churn=2, served=twin)  # fmt: skip
    finally:
        remote.close()
    samples = raw[f"{snap.num_nodes}x6"]
    server, call = np.array(samples["server's call"]), np.array(samples["triton"])
    assert len(server) == len(call) == 3 and (server > 0).all()
    np.testing.assert_allclose(samples["triton - server's call"], call - server)
    assert {"server's call", "triton - server's call"} <= {r["what"] for r in rows}
    (call_row,) = [r for r in rows if r["what"] == "triton"]
    assert 0 < call_row["shared MB"] < call_row["payload MB"]  # through the region, on the session's local server
    remote = TritonBackend(served.latest, url=served.url, deadline_ms=60_000)
    try:
        without = time_sizes(local, remote, {snap.num_nodes: snap}, pod_mix(24), [6], repeat=1, deadline_ms=500.0,
                             churn=2)[1]  # fmt: skip
    finally:
        remote.close()
    assert "server's call" not in without[f"{snap.num_nodes}x6"]  # no twin, no split


def test_bench_triton_burst_times_a_workers_step_with_and_without_the_step_deadline(served, monkeypatch):
    """``--burst``: a worker's step (the prepared call, then the windows opened in the step) on the real
    server, with the worker's step deadline and with none; who placed what is counted."""
    from ops.bench.triton_burst import BURST_COLUMNS, burst_rows

    monkeypatch.setenv("SEMSCHED_MODEL_WINDOW", "4")  # (windows of 4: a burst of 20 opens 4 more in the step)
    monkeypatch.setenv("SEMSCHED_TRITON_STEP_DEADLINE_MS", "60000")
    # and each call's (500 ms by default: on a loaded machine, a demo's tritonserver beside this one, a call
    # missed it and the fallback placed 2 jobs): what is tested here is the step's deadline
    monkeypatch.setenv("SEMSCHED_TRITON_DEADLINE_MS", "30000")
    rows = burst_rows(served.latest, served.url, small_snapshot(), pod_mix(20), burst=20, repeat=2)
    assert [(r["step deadline"], r["hold"]) for r in rows] == [("60000 ms", "0.5 s"), ("none", "none")]
    assert all(set(r) == set(BURST_COLUMNS) for r in rows)
    for row in rows:
        assert row["n"] == 2 and row["placed"] > 4 and row["windows"] > 1  # the step opened windows
        assert row["by the fallback"] == 0 and row["blocking p50 ms"] > 0 and row["prepared p50 ms"] > 0
        assert row["placed"] + row["deferred"] == 20
    monkeypatch.setenv("SEMSCHED_TRITON_STEP_DEADLINE_MS", "0.001")  # spent at once: the fallback places the rest
    (spent, _) = burst_rows(served.latest, served.url, small_snapshot(), pod_mix(20), burst=20, repeat=1)
    assert spent["windows"] == 0 and spent["placed"] == spent["by the fallback"] > 0
