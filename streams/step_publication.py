"""One step's decisions on their way to the broker, and what follows once it has them
(``streams/loop.py`` hands them over; :meth:`StepPublication.settle` finishes the step).

Every decision is acknowledged by the broker before its job changes state and before its
command goes out: the ``decisions`` topic stays the log a restarted worker replays. When some of
a step's decisions fail (the producer refuses one at hand-over, or the broker refuses its
delivery), the others still go the whole way: each decision the broker acknowledged is applied
and its command sent, and only then is the first failure raised. A decision that is stale once
applied sends no command (:func:`streams.state.places_its_job`): while the step waited on the
model or the broker, its job finished in an earlier attempt, say. The failed ones leave
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
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from scheduling.events import DecisionRecord
from scheduling.job import JobRequest
from streams.state import places_its_job

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
    def __init__(self, w: Worker, partition: int, trace: StepTrace) -> None:
        self.w = w
        self.partition = partition
        self.trace = trace
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
        try:
            for h in acked:
                assert h.decision is not None
                t = await self.w.apply_decision(h.decision, self.partition, in_stream=False)
                if places_its_job(t, h.decision):  # else stale: its job moved on while the step waited
                    applied.append(h)
                elif h.command is not None:
                    log.warning("no command for %s (%s): %s", h.decision.job_id, h.decision.decision_id, t.note)
        except Exception as e:  # the decisions applied so far still send their commands
            self.refused(e)
        finally:
            # a failed decision must not leave its job invisible to the next step: inflight hides it
            # from the queue and holds its resources (an acked but unapplied decision is applied when
            # it comes back from the topic, or decided again under its id)
            for rec in self.decided:
                held = self.w.inflight.get(rec.job_id)
                if held is not None and held[0].decision_id == rec.decision_id:
                    del self.w.inflight[rec.job_id]
        commands = [h.command for h in applied if h.command is not None]
        await asyncio.gather(*[await self.w.publish("actions", node.encode(), value, self.partition, headers)
                               for node, value, headers in commands])  # fmt: skip
        if self.failure is not None:
            raise self.failure
