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
