"""A stopping worker closes its policy (streams/worker.py ``close_policy``): the learned policy's Triton
client then unregisters its shared-memory region (tests/inference/serving/test_serving_policy.py)."""

from __future__ import annotations

import asyncio
import logging

from streams.worker import close_policy
from tests.streams.loop_helpers import stood_in_worker


class Closing:
    def __init__(self, fails: bool = False) -> None:
        self.closed, self.fails = 0, fails

    def close(self) -> None:
        self.closed += 1
        if self.fails:
            raise ConnectionError("the server is gone")


def test_the_worker_closes_its_policy_and_a_failure_to_close_is_only_logged(caplog) -> None:
    async def run() -> None:
        w, _ = stood_in_worker(policy="best-fit")
        close_policy(w)  # a heuristic has nothing to close
        for policy in (Closing(), Closing(fails=True)):
            w.loop.policy = policy  # type: ignore[attr-defined]
            with caplog.at_level(logging.WARNING, logger="semsched.worker"):
                close_policy(w)
            assert policy.closed == 1
        assert "the server is gone" in caplog.text

    asyncio.run(run())
