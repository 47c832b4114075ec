"""One step's decisions on their way to the broker, and what follows once it has them
(``streams/loop.py`` hands them over; :meth:`StepPublication.settle` finishes the step).

Every decision is acknowledged by the broker before its job changes state and before its
command goes out: the ``decisions`` topic stays the log a restarted worker replays. When some of
a step's decisions fail (the producer refuses one at hand-over, or the broker refuses its
delivery), the others still go the whole way: each decision the broker acknowledged is applied
and its command sent, and only then is the first failure raised. A decision that is stale once
applied sends no command (:func:`streams.state.places_its_job`): while the step waited on the
model or the broker, its job finished in an earlier attempt, say. A gang runs whole or not at all:
when a member's decision does not go through, the members whose decisions did go back to the
queue (a ``preempted`` report of the worker's) instead of starting. A command the producer or the
broker refuses is sent again at the next steps while its placement waits for it
(:func:`resend_commands`). The failed ones leave
``inflight``, so their jobs are back in the queue and decided again at the next step, under the
same decision id.

(Before, the first failure ended the step there. The decisions the broker had acknowledged came
back from the topic and reserved their jobs, but no command was ever sent for them: each job
waited for the confirmation timeout and was charged a retry.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scheduling.events import DecisionRecord, JobLifecycle, name_some
from scheduling.job import JobRequest
from streams.state import RunningJob, places_its_job

if TYPE_CHECKING:
    from streams.app import Worker
    from streams.telemetry import StepTrace

log = logging.getLogger(__name__)

Headers = list[tuple[str, bytes]]


@dataclasses.dataclass
class Handed:
    """One message of the step the producer took: a decision (with the command its placement sends
    once it is applied), or a waiting record (``decision`` None: for ``explain`` only)."""

    delivery: Awaitable[Any]
    decision: DecisionRecord | None = None
    command: tuple[str, bytes, Headers] | None = None  # (node id, command, headers)


class StepPublication:
    def __init__(self, w: Worker, partition: int, trace: StepTrace, gangs: dict[str, set[str]] | None = None,
                 still_owned: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        """``gangs``: gang id -> the job ids of its members this step places (all of them, or none, run).
        ``still_owned``: False once a rebalance stopped waiting for this step (``SchedulingLoop.abandoned``):
        the partition's new owner applies the decisions from the topic; this step applies none and sends
        no command (found by review: its changelog write and its command raced the new owner's)."""
        self.w = w
        self.still_owned = still_owned
        self.partition = partition
        self.trace = trace
        self.gangs = gangs or {}
        self.decided: list[DecisionRecord] = []
        self.handed: list[Handed] = []
        self.failure: Exception | None = None  # the first hand-over or delivery that failed

    async def decide(self, rec: DecisionRecord, req: JobRequest | None, headers: Headers,
                     command: tuple[str, bytes] | None = None) -> None:  # fmt: skip
        """Hand a decision to the producer. Until it settles, its job is ``inflight``: out of the queue,
        its placement holding its resources."""
        self.w.inflight[rec.job_id] = (rec, req)
        self.decided.append(rec)
        delivery = await self.w.publish("decisions", rec.job_id.encode(), rec.to_bytes(), self.partition, headers)
        self.handed.append(Handed(delivery, rec, None if command is None else (*command, headers)))

    def waiting(self, delivery: Awaitable[Any]) -> None:
        """A waiting record the producer took (``SchedulingLoop._note_waiting``)."""
        self.handed.append(Handed(delivery))

    def refused(self, error: Exception) -> None:
        """The step could not hand over the rest of its decisions: what was handed over still settles."""
        self.failure = self.failure or error

    async def settle(self) -> None:
        """Wait for the broker's answers; apply each acknowledged decision and send its command; then
        raise the first failure, if any."""
        answers = await asyncio.gather(*(h.delivery for h in self.handed), return_exceptions=True)
        acked: list[Handed] = []
        for h, answer in zip(self.handed, answers, strict=True):
            if isinstance(answer, BaseException):  # (a waiting record's is said again: SchedulingLoop._note_waiting)
                self.refused(answer if isinstance(answer, Exception) else RuntimeError(repr(answer)))
            elif h.decision is not None:
                acked.append(h)
        self.trace.acknowledged()
        applied: list[Handed] = []
        if acked and not self.still_owned():
            log.warning("%d decision(s) of a step a rebalance stopped waiting for: their partition's new owner "
                        "applies them; no command sent from here", len(acked))  # fmt: skip
            acked = []
        try:
            for h in acked:
                assert h.decision is not None
                try:
                    t = await self.w.apply_decision(h.decision, self.partition, in_stream=False)
                except Exception as e:  # the others are still applied and send their commands (found by
                    self.refused(e)  # review: the first failure left the rest to wait for their timeouts)
                    continue
                if places_its_job(t, h.decision):  # else stale: its job moved on while the step waited
                    applied.append(h)
                elif h.command is not None:
                    log.warning("no command for %s (%s): %s", h.decision.job_id, h.decision.decision_id, t.note)
        finally:
            # a failed decision must not leave its job invisible to the next step: inflight hides it
            # from the queue and holds its resources (an acked but unapplied decision is applied when
            # it comes back from the topic, or decided again under its id)
            for rec in self.decided:
                held = self.w.inflight.get(rec.job_id)
                if held is not None and held[0].decision_id == rec.decision_id:
                    del self.w.inflight[rec.job_id]
        applied = await self._gangs_whole(applied)
        await self._send_commands([h for h in applied if h.command is not None])
        if self.failure is not None:
            raise self.failure

    async def _gangs_whole(self, applied: list[Handed]) -> list[Handed]:
        """``applied`` without the members of a gang some member of which this step did not place (its
        decision refused or stale): those are moved back to the queue (a ``preempted`` report of the
        worker's, not charged as a failure; no command went out) instead of running without it (found by
        review: they ran, and the member left behind waited until they had finished)."""
        placed = {h.decision.job_id for h in applied if h.decision is not None}
        split = {g: members - placed for g, members in self.gangs.items() if members & placed and members - placed}
        if not split:
            return applied
        gang_of = {job: g for g, members in self.gangs.items() for job in members}
        kept, back = [], []
        for h in applied:
            assert h.decision is not None
            g = gang_of.get(h.decision.job_id)
            (back if g in split else kept).append(h)
        deliveries = []
        for h in back:  # each handed over, then all awaited together
            assert h.decision is not None
            rec, missing = h.decision, sorted(split[gang_of[h.decision.job_id]])
            named = name_some(missing)
            try:  # (a reason kept short: a gang of thousands stays within the event's text limit)
                ev = JobLifecycle(job_id=rec.job_id, cluster=rec.cluster, state="preempted", attempt=rec.attempt,
                                  decision_id=rec.decision_id, node_id=rec.node_id,
                                  reason=f"gang {gang_of[rec.job_id]}: the decision of {named} did not go through")  # fmt: skip
                deliveries.append(await self.w.publish("jobs.lifecycle", rec.job_id.encode(), ev.to_bytes(),
                                                       self.partition))  # fmt: skip
            except Exception as e:  # it stays reserved, without a command: the confirmation timeout moves it on
                self.refused(e)
        for answer in await asyncio.gather(*deliveries, return_exceptions=True):
            if isinstance(answer, BaseException):
                self.refused(answer if isinstance(answer, Exception) else RuntimeError(repr(answer)))
        return kept

    async def _send_commands(self, applied: list[Handed]) -> None:
        """Hand every command over and wait for the broker; one the producer or the broker refuses is
        kept in ``Worker.unsent_commands`` and sent again at the next steps (:func:`resend_commands`)
        while its placement still waits for it (found by review: the first refused hand-over ended the
        step, the later commands were never handed over, and every such job timed out, charged a failure)."""
        deliveries: list[tuple[Handed, Any]] = []
        for h in applied:
            assert h.decision is not None and h.command is not None
            node, value, headers = h.command
            try:
                deliveries.append((h, await self.w.publish("actions", node.encode(), value, self.partition, headers)))
            except Exception as e:
                self._unsent(h, e)
        answers = await asyncio.gather(*(d for _, d in deliveries), return_exceptions=True)
        for (h, _), answer in zip(deliveries, answers, strict=True):
            if isinstance(answer, BaseException):
                self._unsent(h, answer if isinstance(answer, Exception) else RuntimeError(repr(answer)))

    def _unsent(self, h: Handed, error: Exception) -> None:
        assert h.decision is not None and h.command is not None
        self.w.unsent_commands[h.decision.decision_id] = (h.decision.job_id, self.partition, *h.command)
        self.refused(error)


async def resend_commands(w: Worker, owned: set[int], given_up: set[str]) -> int:
    """Send again the placement commands the producer or the broker refused (:meth:`StepPublication._send_commands`)
    whose placements still wait for them (reserved under that decision id, on a partition this worker
    owns: ``owned``, and not given up: ``given_up``, the decision ids the loop timed out or fenced off a
    lost node); drop the others. Returns how many went out."""
    sent = 0
    for decision_id, (job_id, partition, node, value, headers) in list(w.unsent_commands.items()):
        held = w.read("running", job_id, RunningJob)
        if (partition not in owned or decision_id in given_up or held is None or held.decision_id != decision_id
                or held.state != "reserved"):  # fmt: skip
            del w.unsent_commands[decision_id]  # moved on (started, timed out, re-queued, elsewhere): not wanted
            continue
        try:
            await (await w.publish("actions", node.encode(), value, partition, headers))
        except Exception as e:  # the next step tries again
            log.warning("placement command %s for %s refused again: %s: %s", decision_id, job_id, type(e).__name__, e)
            continue
        del w.unsent_commands[decision_id]
        sent += 1
    return sent
