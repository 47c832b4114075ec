"""The policy call's tensors through a shared-memory region: the region itself, and the lane
against the session's real tritonserver (same answers as by the wire; a forgotten region, a
refused one and a missed deadline fall back to the wire; nothing left in /dev/shm)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pytest
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import SPEC, dead_pid

from inference.backends import BackendError
from inference.encoders import get_encoder
from inference.model.step import build_inputs
from inference.serving.client import TritonBackend
from inference.serving.host_files import SHM_DIR, read_token, token_headers
from inference.serving.shared_memory import MIN_REGION, Region, SharedMemoryLane, dead_regions, lane_setting


def step_inputs(jobs: int = 40, nodes: int = 30):
    return build_inputs(small_snapshot(nodes), pod_mix(jobs), 5.0, SPEC, get_encoder(SPEC.encoder))


def ours() -> set[str]:
    """The workers' regions in /dev/shm (not the session server's stubs', ``semsched-triton-<pid>-…``)."""
    return {p.name for p in SHM_DIR.glob("semsched-[0-9]*")}


# -- the region and the lane, without a server ----------------------------------------------------
def test_a_region_keeps_its_contents_after_its_name_is_gone():
    region = Region(4096)
    assert region.path.exists() and oct(region.path.stat().st_mode & 0o777) == "0o600"
    a, b = np.arange(10, dtype=np.int64), np.array([[True, False], [False, True]])
    region.write(0, a)
    region.write(128, b)
    region.unlink()
    assert not region.path.exists()
    np.testing.assert_array_equal(region.read(0, np.int64, a.shape), a)
    np.testing.assert_array_equal(region.read(128, np.bool_, b.shape), b)
    with pytest.raises(ValueError, match="does not fit"):
        region.read(4000, np.float32, (100,))
    region.close()


def test_the_lane_lays_tensors_out_aligned_and_keeps_bytes_in_the_message():
    lane = SharedMemoryLane("auto")
    arrays = {"A": np.zeros((1, 3), np.float32), "NAMES": np.array([[b"x"]], dtype=np.object_),
              "B": np.ones((1, 100), np.int64)}  # fmt: skip
    placed, message, size = lane.plan(arrays, ("OUT", 40))
    assert [(k, off) for k, (off, _) in placed.items()] == [("A", 0), ("B", 64)] and list(message) == ["NAMES"]
    assert size == 64 + 832 + 64
    assert lane.needs_region(size)
    region = lane.new_region(3 * MIN_REGION)
    assert region.size == 4 * MIN_REGION and lane.needs_region(size)  # grown by doubling; not yet registered
    lane.outputs = ["OUT", "OTHER"]  # (the registration reads the model's outputs)
    assert not lane.needs_region(size)
    call = lane.call(placed, ("OUT", 40), size)
    assert call.output == ("OUT", 64 + 832, 40)
    np.testing.assert_array_equal(region.read(64, np.int64, (1, 100)), arrays["B"])
    assert lane.call(placed, ("ABSENT", 40), size).output is None  # an output the model lacks comes by the wire
    lane.retire()
    assert lane.region is None and lane.pending == [region.name] and region.name not in ours()


def test_the_setting_is_auto_or_off(monkeypatch):
    monkeypatch.setenv("SEMSCHED_TRITON_SHARED_MEMORY", "off")
    assert lane_setting() == "off" and SharedMemoryLane().off == "SEMSCHED_TRITON_SHARED_MEMORY=off"
    monkeypatch.setenv("SEMSCHED_TRITON_SHARED_MEMORY", "sometimes")
    with pytest.raises(ValueError, match="auto or off"):
        SharedMemoryLane()


def test_only_dead_workers_regions_are_swept():
    gone = dead_pid()
    names = [f"semsched-{gone}-0a1b", f"semsched-{os.getpid()}-0a1b", f"semsched-{os.getppid()}-0a1b",
             "triton_python_backend_shm_region_1", f"semsched-{gone}"]  # fmt: skip
    assert dead_regions(names) == [f"semsched-{gone}-0a1b"]


# -- against the real server -------------------------------------------------------------------------
def test_a_dead_workers_name_left_in_dev_shm_goes_when_the_next_lane_starts():
    """A worker killed between creating its region and the server mapping it left the name (found by review)."""
    from inference.serving.host_files import SHM_DIR

    dead, alive = SHM_DIR / f"semsched-{dead_pid()}-0123456789ab", SHM_DIR / f"semsched-{os.getpid()}-0123456789ab"
    for path in (dead, alive):
        path.write_bytes(b"x")
    try:
        SharedMemoryLane("auto")
        assert not dead.exists() and alive.exists()
    finally:
        dead.unlink(missing_ok=True)
        alive.unlink(missing_ok=True)


async def test_the_same_answer_through_shared_memory_as_by_the_wire(served):
    inputs = step_inputs()
    shm = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    wire = TritonBackend(served.latest, url=served.url, deadline_ms=5000, shared_memory="off")
    try:
        by_region, by_wire = shm.policy(inputs), wire.policy(inputs)
        assert by_region["shared_bytes"] > 0 and by_wire["shared_bytes"] == 0
        assert by_region["answer_bytes"] < by_wire["answer_bytes"]  # the scores came through the region ...
        assert by_region["request_bytes"] < by_wire["request_bytes"] / 100  # ... and the inputs went there
        total = by_region["request_bytes"] + by_region["answer_bytes"] + by_region["shared_bytes"]
        assert abs(total - by_wire["request_bytes"] - by_wire["answer_bytes"]) < 2048  # (the messages' headers)
        for key in ("scores", "node_part"):
            np.testing.assert_array_equal(by_region[key], by_wire[key])
        again = await shm.policy_async(inputs)
        assert again["shared_bytes"] == by_region["shared_bytes"]
        np.testing.assert_array_equal(again["scores"], by_wire["scores"])
        region = shm.lane.region
        assert region is not None and region.name not in ours()  # unlinked once the server mapped it
        status = shm._sync_client().get_system_shared_memory_status(headers=shm.lane.headers(), as_json=True)
        assert region.name in status.get("regions", {})
    finally:
        shm.close()
        wire.close()
    status = wire._sync_client().get_system_shared_memory_status(headers=shm.lane.headers(), as_json=True)
    assert region.name not in status.get("regions", {})  # close() unregistered it
    wire.close()


def test_a_region_the_server_forgot_is_replaced_and_the_step_still_answered(served):
    inputs = step_inputs()
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    try:
        first = b.policy(inputs)
        old = b.lane.region
        b._sync_client().unregister_system_shared_memory(old.name, headers=b.lane.headers())  # as a restarted server
        out = b.policy(inputs)
        assert out["shared_bytes"] == 0  # this step by the wire ...
        np.testing.assert_array_equal(out["scores"], first["scores"])
        out = b.policy(inputs)
        assert out["shared_bytes"] > 0 and b.lane.region is not old  # ... the next through a fresh region
        np.testing.assert_array_equal(out["scores"], first["scores"])
    finally:
        b.close()


def test_a_region_the_server_cannot_map_turns_the_lane_off(served, monkeypatch):
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    made = SharedMemoryLane.new_region

    def gone(lane: SharedMemoryLane, size: int) -> Region:  # the server's shm_open will not find it
        region = made(lane, size)
        region.unlink()
        return region

    monkeypatch.setattr(SharedMemoryLane, "new_region", gone)
    try:
        out = b.policy(step_inputs())
        assert out["shared_bytes"] == 0 and out["scores"].shape == (40, 30)
        assert b.lane.off and "shared memory" in b.lane.off
        assert b.policy(step_inputs())["shared_bytes"] == 0
    finally:
        b.close()


def test_a_passing_blip_at_registration_does_not_turn_the_lane_off(served, monkeypatch):
    """(Found by review: any failed registration turned shared memory off for the rest of the process.)"""
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    real, blips = TritonBackend._op, []

    def blip_once(self: TritonBackend, op: Any, client: Any) -> Any:
        if op.kind == "register" and not blips:
            blips.append(op)
            raise RuntimeError("[StatusCode.UNAVAILABLE] Socket closed")
        return real(self, op, client)

    monkeypatch.setattr(TritonBackend, "_op", blip_once)
    try:
        assert b.policy(step_inputs())["shared_bytes"] == 0 and blips and b.lane.off is None  # by the wire once
        assert b.policy(step_inputs())["shared_bytes"] > 0  # and in shared memory again at the next call
    finally:
        b.close()


def test_a_region_that_cannot_be_created_turns_the_lane_off_and_the_step_goes_by_the_wire(served, monkeypatch):
    """/dev/shm full or out of file descriptors (found by review: the OSError escaped the call, as a
    PermissionError out of ``LearnedPolicy.score``, and the lane stayed on, so every step failed)."""
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    wire = TritonBackend(served.latest, url=served.url, deadline_ms=5000, shared_memory="off")

    def full(region: Region, size: int, owner: int | None = None) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Region, "__init__", full)
    try:
        inputs = step_inputs()
        out = b.policy(inputs)
        assert out["shared_bytes"] == 0
        np.testing.assert_array_equal(out["scores"], wire.policy(inputs)["scores"])
        assert b.lane.off and "cannot create a shared-memory region" in b.lane.off
        assert b.policy(inputs)["shared_bytes"] == 0
    finally:
        b.close()
        wire.close()


def test_an_error_of_the_call_itself_is_a_backend_error(served, monkeypatch):
    """Not an op's (those are BackendErrors already): the flow's own code, writing the region say."""
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)

    def broken(lane: SharedMemoryLane, *args: object) -> None:
        raise ValueError("shared memory region semsched-1-0 is closed")

    monkeypatch.setattr(SharedMemoryLane, "call", broken)
    try:
        with pytest.raises(BackendError, match="ValueError: shared memory region"):
            b.policy(step_inputs())
    finally:
        b.close()


def test_a_missed_deadline_retires_the_region_until_the_server_lets_go_of_it(served):
    """A deadline the server's work outlasts (~0.2 s for this step, 60 ms allowed): Triton refuses
    to unregister a region a request still uses; the next step goes on with a fresh region and
    the old one is unregistered later."""
    big = step_inputs(jobs=300, nodes=2000)
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    try:
        b.policy(big)
        refused = False
        for _ in range(3):  # (the timed-out request must reach the server first: it almost always does)
            old = b.lane.region
            b.deadline_ms = 60
            with pytest.raises(BackendError, match="DEADLINE_EXCEEDED"):
                b.policy(big)
            assert b.lane.region is None and b.lane.pending == [old.name]
            b.deadline_ms = 5000
            out = b.policy(step_inputs())  # at once, while the server still works on the timed-out one
            assert out["shared_bytes"] > 0 and b.lane.region is not old and b.lane.off is None
            refused = old.name in b.lane.pending
            if refused:
                break
        assert refused, "the server never refused to unregister a region in use"
        time.sleep(1.0)
        b.policy(step_inputs())
        status = b._sync_client().get_system_shared_memory_status(headers=b.lane.headers(), as_json=True)
        assert not b.lane.pending and old.name not in status.get("regions", {})
    finally:
        b.close()


async def test_a_cancelled_call_retires_the_region_and_frees_the_lane(served):
    """The worker cancels a step's call at the step's deadline (StepCaller): the server may still
    write that answer into the region, so the next call must not reuse it."""
    import asyncio

    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    try:
        first = await b.policy_async(step_inputs())
        old = b.lane.region
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(b.policy_async(step_inputs()), timeout=0.0005)
        assert not b.lane.busy and b.lane.region is None and old.name in b.lane.pending
        out = await b.policy_async(step_inputs())
        assert out["shared_bytes"] > 0 and b.lane.region is not old
        np.testing.assert_array_equal(out["scores"], first["scores"])
    finally:
        b.close()


def test_without_the_token_the_tensors_go_by_the_wire_and_the_lane_stays_on(served, monkeypatch, tmp_path):
    """Another user's or container's worker: no token file it can read."""
    import inference.serving.policy_call as policy_call

    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    monkeypatch.setattr(policy_call, "read_token", lambda url: None)
    try:
        out = b.policy(step_inputs())
        assert out["shared_bytes"] == 0 and b.lane.off is None and b.lane.region is None
        monkeypatch.undo()  # the file is readable again (e.g. the server started after the worker)
        assert b.policy(step_inputs())["shared_bytes"] > 0
    finally:
        b.close()


def test_registering_needs_the_token_and_a_wrong_one_turns_the_lane_off(served, monkeypatch):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    import inference.serving.policy_call as policy_call

    region = Region(4096)
    client = grpcclient.InferenceServerClient(served.url)
    try:
        with pytest.raises(InferenceServerException, match="restricted"):
            client.register_system_shared_memory(region.name, region.key, region.size)
    finally:
        client.close()
        region.close()
    b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)
    monkeypatch.setattr(policy_call, "read_token", lambda url: "not-the-token")
    try:
        out = b.policy(step_inputs())
        assert out["shared_bytes"] == 0 and b.lane.off and "restricted" in b.lane.off
    finally:
        b.close()


def test_a_dead_workers_region_is_unregistered_by_the_next_worker(served):
    import tritonclient.grpc as grpcclient

    gone = dead_pid()
    headers = token_headers(read_token(served.url) or "")
    region = Region(4096, owner=gone)  # as the dead worker registered it
    client = grpcclient.InferenceServerClient(served.url)
    b = None
    try:
        client.register_system_shared_memory(region.name, region.key, region.size, headers=headers)
        region.close()
        b = TritonBackend(served.latest, url=served.url, deadline_ms=5000)  # (after: its lane sweeps dead names)
        assert b.policy(step_inputs())["shared_bytes"] > 0
        status = client.get_system_shared_memory_status(headers=headers, as_json=True)
        assert region.name not in status.get("regions", {}) and b.lane.region.name in status["regions"]
    finally:
        if b is not None:
            b.close()
        client.unregister_system_shared_memory(region.name, headers=headers)
        client.close()


def test_a_dead_name_this_user_cannot_remove_does_not_stop_the_lane(tmp_path, monkeypatch):
    """Another user's dead worker's name in the sticky /dev/shm: unlink says PermissionError, and building
    the lane (so the Triton backend, so the learned policy) must not fail on it (found by review)."""
    from pathlib import Path

    import inference.serving.shared_memory as shm

    (tmp_path / f"semsched-{dead_pid()}-0123456789ab").write_bytes(b"x")
    mine = tmp_path / f"semsched-{dead_pid()}-ba9876543210"
    mine.write_bytes(b"x")
    real = Path.unlink

    def refuse_theirs(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith("0123456789ab"):
            raise PermissionError(1, "Operation not permitted", str(self))
        real(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse_theirs)
    assert shm.remove_dead_files(tmp_path) == [mine] and not mine.exists()
    monkeypatch.setattr(shm, "SHM_DIR", tmp_path)
    SharedMemoryLane("auto")  # (no error)


def test_unregistering_retired_regions_takes_a_quarter_of_the_deadline_at_most():
    """A server slow to let go of retired regions (each unregister 300 ms here) took the whole deadline
    before the infer, and the step fell back (found by review). Now that housekeeping gets a quarter of
    it, and what is left over waits for the next call."""
    from inference.serving.policy_call import policy_flow

    lane = SharedMemoryLane("auto", "127.0.0.1:1")  # (no server's token for it: the infer goes by the wire)
    lane.pending = ["semsched-1-aa", "semsched-1-bb", "semsched-1-cc"]
    inputs = build_inputs(small_snapshot(12), pod_mix(10), 5.0, SPEC, get_encoder(SPEC.encoder))
    flow = policy_flow(lane, inputs, 2000.0)
    op, given = next(flow), []
    while op.kind == "unregister":
        given.append(op.args["deadline_ms"])
        time.sleep(min(300.0, op.args["deadline_ms"]) / 1000.0)
        if op.args["deadline_ms"] < 300.0:
            op = flow.throw(BackendError("triton shared memory: DEADLINE_EXCEEDED"))
        else:
            op = flow.send(None)
    assert op.kind == "infer" and op.args["deadline_ms"] > 1300.0  # (three 300 ms unregisters: 1,100 ms left)
    assert given[0] == pytest.approx(500.0, abs=20.0) and len(given) == 2 and given[1] < 210.0  # 500 ms in all
    assert lane.pending == ["semsched-1-bb", "semsched-1-cc"]  # the next call's to unregister
    flow.close()


def test_a_region_retired_as_the_lane_went_off_is_still_unregistered():
    """Found by review: a region retired when its larger successor could not be created (/dev/shm full)
    stayed registered with the server, because every later call went by the wire past the housekeeping."""
    from inference.serving.policy_call import policy_flow

    lane = SharedMemoryLane("auto", "127.0.0.1:1")
    lane.pending = ["semsched-1-aa"]
    lane.refused("cannot create a shared-memory region: [Errno 28] No space left on device")
    inputs = build_inputs(small_snapshot(12), pod_mix(10), 5.0, SPEC, get_encoder(SPEC.encoder))
    for _ in range(2):
        flow, asked = policy_flow(lane, inputs, 2000.0), []
        op = next(flow)
        while op.kind == "unregister":
            asked.append(op.args["name"])
            op = flow.send(None)
        assert op.kind == "infer" and not lane.busy
        flow.close()
    assert asked == [] and lane.pending == [] and lane.off  # unregistered by the first call, by the wire since


@pytest.mark.parametrize(("error", "swept"), [
    (BackendError("triton shared memory: DEADLINE_EXCEEDED after 125 ms"), False),  # out of time: again later
    (BackendError("triton shared memory: UNAVAILABLE: connection reset"), False),  # a blip: again later
    (BackendError("triton shared memory: INVALID_ARG: not supported"), True),  # refused: not asked again
    (GeneratorExit(), False),  # the call cancelled at the status op (the step's deadline)
])  # fmt: skip
def test_the_sweep_of_dead_workers_regions_is_done_only_once_it_ran_or_was_refused(monkeypatch, error, swept):
    """Found by review: the sweep was marked done before its status op, so a cancelled call, or a status or
    unregister that ran out of the housekeeping's time, gave it up for good."""
    from inference.serving import policy_call

    monkeypatch.setattr(policy_call, "read_token", lambda url: "token")
    lane = SharedMemoryLane("auto", "127.0.0.1:1")
    inputs = build_inputs(small_snapshot(12), pod_mix(10), 5.0, SPEC, get_encoder(SPEC.encoder))
    flow = policy_call.policy_flow(lane, inputs, 2000.0)
    op = next(flow)
    assert op.kind == "status"
    if isinstance(error, GeneratorExit):
        flow.close()
    else:
        op = flow.throw(error)
        assert op.kind == "register"  # the registration goes on
        flow.close()
    assert lane.swept is swept
    lane.drop_region()


def test_the_sweep_left_unfinished_for_lack_of_time_is_not_done(monkeypatch):
    from inference.serving import policy_call

    monkeypatch.setattr(policy_call, "read_token", lambda url: "token")
    lane = SharedMemoryLane("auto", "127.0.0.1:1")
    inputs = build_inputs(small_snapshot(12), pod_mix(10), 5.0, SPEC, get_encoder(SPEC.encoder))
    flow = policy_call.policy_flow(lane, inputs, 400.0)  # housekeeping: 100 ms
    op = flow.send(None)
    dead = [f"semsched-{dead_pid()}-{i:02x}" for i in range(3)]
    op = flow.send({"regions": {name: {} for name in dead}})
    assert op.kind == "unregister" and op.args["name"] == dead[0]
    time.sleep(0.12)  # the first unregister takes the housekeeping's whole time
    op = flow.send(None)
    assert op.kind == "register" and lane.swept is False  # the other two at the next registration
    flow.close()
    lane.drop_region()
