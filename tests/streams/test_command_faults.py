"""SEMSCHED_FAULT_LOSE_COMMANDS: the placement commands after the first N are answered as delivered and never
sent; the worker's other messages go on; a malformed value is refused by name."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduling.events import PlacementCommand, PreemptCommand
from streams.command_faults import ENV, CommandFaults


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    async def publish(self, topic: str, key: bytes | None, value: bytes, partition: int, headers: Any = None) -> Any:
        self.sent.append((topic, value))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def test_placement_commands_after_the_first_n_are_lost_and_nothing_else() -> None:
    w = Recorder()
    faults = CommandFaults("1")
    faults.install(w)  # type: ignore[arg-type]
    place = [PlacementCommand(decision_id=f"d{i}", job_id=f"j{i}", node_id="n1", policy="p").to_bytes() for i in (0, 1)]
    fence = PreemptCommand(decision_id="f", node_id="n1", job_id="j0", target_decision_id="d0", reason="r").to_bytes()

    async def go() -> None:
        for value in (*place, fence):
            await (await w.publish("actions", b"n1", value, 0))  # every one answered as delivered
        await (await w.publish("decisions", b"j1", b"{}", 0))

    asyncio.run(go())
    assert [v for _, v in w.sent] == [place[0], fence, b"{}"] and (faults.sent, faults.lost) == (1, 1)


def test_nothing_is_lost_by_default() -> None:
    w = Recorder()
    before = w.publish
    CommandFaults("").install(w)  # type: ignore[arg-type]
    assert w.publish == before


@pytest.mark.parametrize("spec", ["x", "-1", "3 commands"])
def test_a_malformed_value_names_the_variable(spec: str) -> None:
    with pytest.raises(ValueError, match=f"{ENV}: .* is not a number of placement commands"):
        CommandFaults(spec)
