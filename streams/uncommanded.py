"""Placements reserved without a command: their commands sent again by the partition's owner.

A decision is applied before its command goes out (``streams/loop.py``). A worker that died in
between, or a step a rebalance stopped waiting for (it sends no command on a partition given away:
``SchedulingLoop.abandoned``), leaves its job reserved with no command on the way. The partition's
next owner (or the restarted worker) holds that reservation: from the changelog, from the decisions
it replays or restores, or from a late decision it reads after its catch-up. It waited for the
confirmation timeout, then charged the job a failed attempt and placed it again (found by review).

So after every assignment, once both catch-up gates are open (the decisions and lifecycle reports
already on the topics applied: a placement that started is no longer reserved), the owner sends the
command of every placement still reserved on the partitions it decides; and later, the command of a
placement a decision read from the topic reserved (not this worker's own, which its step commands).
Commands are idempotent by decision id (ARCHITECTURE.md): an agent that has the first counts the
second a duplicate and does nothing. A command sent again is an event of its own in the archive (the
first keeps its reason and time), one however often it is sent again.

An inherited reservation's confirmation timeout runs from when this worker came to hold its partition
(``Worker.confirm_clock``). Not sent again (found by the reviews of the change):
- a reservation within ``RESEND_MARGIN_S`` of its timeout: the agent's ``started`` might come after
  the ``timed_out`` re-queued the job, and its retry would run beside the late start until fenced;
- a placement given up on: timed out, or moved off a lost node (its fence just went out);
- a gang member, until its gang is placed whole (a member pending: its decision never went through):
  alone, it would run without them, and they would wait for it. It waits in ``due`` meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from scheduling.events import DecisionRecord, partition_for
from streams.decision_records import held_placement_command
from streams.state import RunningJob, Transition

if TYPE_CHECKING:
    from streams.app import Worker

log = logging.getLogger(__name__)

RESENT_REASON = "sent again by the partition's owner: its placement was reserved without a command on the way"
RESEND_MARGIN_S = 5.0  # no command sent again this close to the placement's confirmation timeout


class Uncommanded:
    """The placements whose command may never have gone out (decision id → job id), sent by :meth:`send`."""

    def __init__(self, w: Worker) -> None:
        self.w = w
        self.due: dict[str, str] = {}
        self.sweep_due = True  # at the first steps after an assignment: every reservation held
        self.sent = 0

    def reassigned(self) -> None:
        """A rebalance assigned partitions: what is reserved on them is looked at again."""
        self.sweep_due = True

    @staticmethod
    def own(w: Worker, rec: DecisionRecord) -> bool:
        """Whether ``rec`` is one of this worker's steps' decisions still under way (its step commands it)."""
        held = w.inflight.get(rec.job_id)  # (its id and its placement: a decision id is the same on any owner, and
        if held is None:                  # another owner's of the same attempt may hold another node)
            return False
        mine = held[0]
        return (mine.decision_id, mine.node_id, list(mine.gpu_indices)) == (rec.decision_id, rec.node_id,
                                                                             list(rec.gpu_indices))  # fmt: skip

    def note_applied(self, rec: DecisionRecord, t: Transition, *, own: bool) -> None:
        """A decision read from the topic was applied: when it reserved its job, and the step that made it
        is not this worker's (``own``, :meth:`own` before the apply), its command may never have gone out."""
        run = t.running.get(rec.job_id)
        if not own and run is not None and run.decision_id == rec.decision_id:
            self.due[rec.decision_id] = rec.job_id

    def sweep(self) -> None:
        """Every placement reserved in the running table (:meth:`send` keeps those on the partitions decided)."""
        for d in list(self.w.running.values()):
            if d is not None and d["state"] == "reserved":
                self.due[d["decision_id"]] = d["job"]["job_id"]
        self.sweep_due = False

    async def send(self, deciding: set[int], given_up: set[str], policy: str) -> int:
        """Send the due commands whose placements are still reserved under their decision id on a partition
        in ``deciding``, and not given up on (``given_up``: timed out, moved off a lost node); forget the
        others, but keep a gang member until its gang is placed whole. Returns how many went out."""
        if self.sweep_due:
            self.sweep()
        if not self.due:
            return 0
        commands, deliveries = [], []
        latest = time.time() - max(0.0, self.w.settings.confirm_timeout_s - RESEND_MARGIN_S)
        gangs: dict[tuple[str, str], int] | None = None
        waiting: dict[str, str] = {}  # gang members whose gang is not placed whole yet: looked at again
        for decision_id, job_id in list(self.due.items()):
            del self.due[decision_id]
            r = self.w.read("running", job_id, RunningJob)
            if (r is None or r.decision_id != decision_id or r.state != "reserved" or decision_id in given_up
                    or partition_for(r.job.cluster, self.w.settings.partitions) not in deciding
                    or self.w.confirm_clock(r.reserved_ts, r.job.cluster) < latest):  # fmt: skip
                continue
            if r.job.gang_id:
                gangs = self._held_gangs() if gangs is None else gangs
                if not self._whole(r, gangs):  # (found by review: dropped, it never went out once the gang was)
                    waiting[decision_id] = job_id
                    continue
            cmd = held_placement_command(r, policy=policy, reason=RESENT_REASON)
            part = partition_for(r.job.cluster, self.w.settings.partitions)
            try:
                deliveries.append(await self.w.publish("actions", cmd.node_id.encode(), cmd.to_bytes(), part))
                commands.append((decision_id, job_id))
            except Exception as e:  # the next step tries again
                log.warning("command of %s (%s) refused: %s: %s", job_id, decision_id, type(e).__name__, e)
                self.due[decision_id] = job_id
        self.due.update(waiting)
        sent = 0
        for (decision_id, job_id), answer in zip(commands, await asyncio.gather(*deliveries, return_exceptions=True),
                                                 strict=True):  # fmt: skip
            if isinstance(answer, BaseException):
                log.warning("command of %s (%s) refused: %r", job_id, decision_id, answer)
                self.due[decision_id] = job_id
            else:
                sent += 1
        if sent:
            log.info("sent the command of %d placement(s) reserved without one on the way (a previous owner's, "
                     "or a step's before a restart or a rebalance)", sent)  # fmt: skip
        self.sent += sent
        return sent

    def _held_gangs(self) -> dict[tuple[str, str], int]:
        """(cluster, gang id) → its members placed (reserved or running)."""
        held: dict[tuple[str, str], int] = {}
        for d in list(self.w.running.values()):
            if d is not None and (gang := d["job"].get("gang_id")):
                key = (d["job"].get("cluster", ""), gang)
                held[key] = held.get(key, 0) + 1
        return held

    def _whole(self, r: RunningJob, held: dict[tuple[str, str], int]) -> bool:
        """Whether ``r``'s gang is placed whole: its members placed, and those finished, make its size."""
        assert r.job.gang_id is not None
        rejected, finished = self.w.gang_state(r.job.cluster, r.job.gang_id, r.submit_ts)
        return not rejected and held.get((r.job.cluster, r.job.gang_id), 0) + finished >= r.job.gang_size
