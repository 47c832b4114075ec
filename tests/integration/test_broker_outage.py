"""The only broker stops (gracefully, as an operator's restart does) under a running worker and
agents, and comes back: meanwhile neither spins on failed metadata updates (streams/kafka_backoff.py:
the worker once logged ~4 failed updates a millisecond, 1 GB in 25 minutes, at 100 % of a core),
and afterwards the jobs submitted before, during and after the outage all run, each once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from ops.kafka.broker import KafkaBroker
from ops.local_stack import LocalStack, free_port
from ops.traces import get_loader
from storage.queries import _PLACED_TWICE, _STARTED_TWICE
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.integration.conftest import FAST_AGENTS, publish

pytestmark = pytest.mark.integration

N = 60
FAILED_UPDATE = "Unable to update metadata from"  # aiokafka/client.py's line for one failed update
OUTAGE_S = 8.0


@pytest.fixture
def own_broker_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A stack with a broker of its own (the session's broker is not ours to stop)."""
    run_dir = tmp_path_factory.mktemp("outage")
    port = free_port()
    broker = KafkaBroker(port=port, data_dir=run_dir / "kafka", controller_port=free_port(), tied=True)
    settings = Settings(bootstrap=broker.bootstrap, topic_prefix=f"it{uuid.uuid4().hex[:8]}.", state_dir=run_dir,
                        web_port=free_port(), partitions=4, replication_factor=1, step_s=0.5,
                        confirm_timeout_s=20, snapshot_verify_s=0)  # fmt: skip
    stack = LocalStack(settings, run_dir)
    stack.broker = broker
    broker.start(timeout=90)
    try:
        yield stack
    finally:
        stack.stop()


def _failed_updates(stack: LocalStack) -> dict[str, int]:
    return {name: c.log_path.read_text(errors="replace").count(FAILED_UPDATE) for name, c in stack.children.items()}


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
    for name in during:
        failed = during[name] - before.get(name, 0)
        assert failed < 100 * OUTAGE_S, f"the {name} logged {failed} failed metadata updates in {OUTAGE_S:.0f} s"
    for name, child in p.children.items():
        assert child.alive(), f"the {name} died in the outage:\n{child.log_tail()}"

    st = p.wait(lambda s: s["finished"] + s["rejected"] == N and s["pending"] + s["running"] + s["reserved"] == 0,
                timeout=180, what=f"all {N} jobs settled after the outage", needs=("worker", "agents"))  # fmt: skip
    assert st["finished"] == N, st
    assert p.wait_scalar("SELECT uniqExact(job_id) FROM jobs_lifecycle FINAL WHERE state = 'finished'", N,
                         timeout=60) == N  # fmt: skip
    assert p.sql(_PLACED_TWICE) == []
    assert p.sql(_STARTED_TWICE) == []
    assert p.children["worker"].stop() == 0
