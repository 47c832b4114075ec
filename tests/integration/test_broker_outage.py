"""The only broker stops (gracefully, as an operator's restart does) under a running worker and
agents. If it comes back within the agents' BROKER_WAIT_S, both rode it out, and neither spun on
failed metadata updates meanwhile (streams/kafka_backoff.py:
the worker once logged ~4 failed updates a millisecond, 1 GB in 25 minutes, at 100 % of a core), and
the jobs submitted before and after the outage all run, each once. If it does not, both still stop
when told to, within the stop time-out (streams/stop_deadline.py: the worker did not within 200 s)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator

import pytest

from ops.kafka.broker import KafkaBroker
from ops.local_stack import LocalStack, free_port
from ops.traces import get_loader
from storage.queries import _PLACED_TWICE, _STARTED_TWICE
from streams.kafka_logs import CollapsedRepeats
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish

pytestmark = pytest.mark.integration

N = 60
FAILED_UPDATE = "Unable to update metadata from"  # aiokafka/client.py's line for one failed update
HELD = re.compile(r"\(and ([\d,]+) more like it in the ")
OUTAGE_S = 50.0  # longer than aiokafka's 40 s request time-out, which stopped the agents
STOP_TIMEOUT_S = 8.0


@pytest.fixture
def own_broker_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A stack with a broker of its own (the session's broker is not ours to stop)."""
    run_dir = tmp_path_factory.mktemp("outage")
    port = free_port()
    broker = KafkaBroker(port=port, data_dir=run_dir / "kafka", controller_port=free_port(), tied=True)
    settings = Settings(bootstrap=broker.bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.", state_dir=run_dir,
                        web_port=free_port(), partitions=4, replication_factor=1, step_s=0.5,
                        confirm_timeout_s=20, snapshot_verify_s=0, stop_timeout_s=STOP_TIMEOUT_S)  # fmt: skip
    stack = LocalStack(settings, run_dir)
    stack.broker = broker
    broker.start(timeout=90)
    try:
        yield stack
    finally:
        stack.stop()


def _failed_updates(stack: LocalStack) -> dict[str, int]:
    """Per process, the failed updates its log tells of: each line, and those it says it held back
    (streams/kafka_logs.py CollapsedRepeats)."""
    out = {}
    for name, c in stack.children.items():
        lines = [ln for ln in c.log_path.read_text(errors="replace").splitlines() if FAILED_UPDATE in ln]
        out[name] = sum(1 + int((m.group(1) if (m := HELD.search(ln)) else "0").replace(",", "")) for ln in lines)
    return out


def test_a_broker_outage_is_ridden_out_without_spinning_or_losing_a_job(own_broker_stack: LocalStack) -> None:
    p = own_broker_stack
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info")
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    jobs = [tj.event for tj in loader.jobs()]
    assert len(jobs) == N
    publish(p.settings, list(loader.nodes()))
    publish(p.settings, jobs[: N // 3])
    p.wait(lambda s: s["finished"] >= N // 3, timeout=90, what="the first jobs finished", needs=("worker", "agents"))

    assert p.broker is not None
    before = _failed_updates(p)
    p.broker.stop()  # SIGTERM: the broker hands its partitions' leadership away, leaving none
    time.sleep(OUTAGE_S)
    during = _failed_updates(p)
    p.broker.start(timeout=90)  # (the agents' telemetry of the outage waited in their producer)
    publish(p.settings, jobs[N // 3:])

    # paced at the clients' 100 ms backoff: a few dozen failed updates a second per process,
    # not thousands (each client: Faust's consumer and producer, the archiver's consumer, the agents')
    # (the log tells of those held back only in its next line of the kind: the last 10 s are untold, so the
    # count covers the outage but its last interval, found by review: a client at 110 a second passed)
    told_s = OUTAGE_S - CollapsedRepeats().every_s
    for name in during:
        failed = during[name] - before.get(name, 0)
        assert failed < 100 * told_s, f"the {name} logged {failed} failed metadata updates in {told_s:.0f} s"
    for name, child in p.children.items():
        assert child.alive(), f"the {name} died in the outage:\n{child.log_tail()}"

    st = p.wait(lambda s: s["finished"] + s["rejected"] == N and s["pending"] + s["running"] + s["reserved"] == 0,
                timeout=180, what=f"all {N} jobs settled after the outage", needs=("worker", "agents"))  # fmt: skip
    assert st["finished"] == N, st
    assert p.wait_scalar("SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'", N,
                         timeout=60) == N  # fmt: skip
    assert p.sql(_PLACED_TWICE) == []
    assert p.sql(_STARTED_TWICE) == []
    # the agents' runs went on through the outage: no job was moved off its node
    assert p.scalar("SELECT count() FROM jobs_lifecycle FINAL WHERE state = 'preempted'") == 0
    assert p.children["worker"].stop() == 0


def test_told_to_stop_while_the_broker_is_gone_each_process_goes_within_the_stop_time_out(
        own_broker_stack: LocalStack) -> None:  # fmt: skip
    """Stopped mid-replay, with writes still unsent: the worker's clean stop waits for its producer
    (1,200 s), so it gives up at the time-out and says why; nothing is lost by it (what it had not
    committed is read again, as after the SIGKILL of tests/integration/test_worker_restart.py)."""
    p = own_broker_stack
    asyncio.run(ensure_topics(p.settings))
    p.start_worker("--loglevel", "info")
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=4 * N)
    publish(p.settings, list(loader.nodes()))
    publish(p.settings, [tj.event for tj in loader.jobs()])  # a backlog still being worked through below
    p.wait(lambda s: s["running"] + s["finished"] >= 20, timeout=90, what="jobs running", needs=("worker", "agents"))
    assert p.broker is not None
    p.broker.stop()  # mid-replay: the worker's and the agents' producers hold what they could not send
    time.sleep(2)
    gone: dict[str, float] = {}
    t0 = time.monotonic()
    for child in p.children.values():
        os.killpg(child.pid, signal.SIGTERM)
    for name, child in p.children.items():
        child.proc.wait(STOP_TIMEOUT_S + 20)  # (TimeoutExpired: still running, the failure this test is for)
        gone[name] = time.monotonic() - t0
    for name, child in p.children.items():
        if child.proc.returncode != 0:  # gave up: in one line that says so
            assert "still stopping 8 s after it was told to stop (SEMSCHED_STOP_TIMEOUT)" in child.log_tail(5), (
                f"the {name} exited {child.proc.returncode} after {gone[name]:.0f} s:\n{child.log_tail()}")
    assert max(gone.values()) < STOP_TIMEOUT_S + 15, gone

