"""The spans of one job's path, and how they connect.

::

  producer   send jobs.submitted      PRODUCER  root of the job's trace (or a child of the
             │                                   sender's current span); traceparent → headers
  worker     process jobs.submitted   CONSUMER  child of the submission (a message without a
             │                                   usable header starts a new root trace)
             schedule job             PRODUCER  child of the ingest span, LINKED to the step span;
             │                                   starts when the step starts, ends once the
             │                                   decision is acknowledged and the command is
             │                                   handed to the producer; its context rides on the
             │                                   decision record and on the command
  agents     execute job              CONSUMER  child of "schedule job": from the command's
             │                                   receipt to finished / failed / preempted / refused;
             │                                   the lifecycle events it publishes carry it
  worker     process jobs.lifecycle   CONSUMER  child of "execute job" (only for messages that
                                                 carry a context: no stray roots)
  worker     schedule step            INTERNAL  one per cluster per step, its own root trace
  worker     archive write            INTERNAL  one per batch write, its own root trace, LINKED to
                                                 every record of the batch that carried a context

A step places many jobs at once, and a batch write holds records of many jobs: those are
links, while each job keeps one trace from submission to its last lifecycle event. So one
job is followed by its trace id, a step or a write by following its links.

The worker remembers the ingest span of each pending job in memory (:class:`JobTraces`), so a
worker that restarts places the jobs it recovered from its changelogs in new root traces.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode

from streams.telemetry.metrics import record_decision
from streams.telemetry.propagation import Headers, context_of, extract, has_context, inject
from streams.telemetry.setup import tracer


def _kafka(topic: str, **attrs: Any) -> dict[str, Any]:
    return {"messaging.system": "kafka", "messaging.destination.name": topic,
            **{k: v for k, v in attrs.items() if v is not None}}  # fmt: skip


@contextlib.contextmanager
def send_span(topic: str, job_id: str) -> Iterator[Headers]:
    """Around publishing one submission: yields the headers that start the job's trace."""
    with tracer().start_as_current_span("send jobs.submitted", kind=SpanKind.PRODUCER,
                                        attributes=_kafka(topic, **{"semsched.job_id": job_id})) as span:  # fmt: skip
        yield inject(span)


def consume_span(topic: str, short: str, headers: Any, partition: int, offset: int
                 ) -> contextlib.AbstractContextManager[Span | None]:  # fmt: skip
    """Around the worker's handling of one message: the current span while it runs (so the
    messages it sends carry it). Submissions always get one; lifecycle reports when they carry
    a context; other topics none."""
    if short == "jobs.submitted" or (short == "jobs.lifecycle" and has_context(headers)):
        return tracer().start_as_current_span(
            f"process {short}", context=extract(headers), kind=SpanKind.CONSUMER,
            attributes=_kafka(topic, **{"messaging.kafka.destination.partition": partition,
                                        "messaging.kafka.message.offset": offset}))  # fmt: skip
    return contextlib.nullcontext(None)


class JobTraces:
    """Job id → the span context of its ingest, for the worker's later spans of that job.
    Bounded (oldest first out); a restarted worker starts empty."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._ctx: OrderedDict[str, SpanContext] = OrderedDict()

    def remember(self, job_id: str, span: Span | None) -> None:
        if span is None:
            return
        sc = span.get_span_context()
        if sc.is_valid:
            self._ctx[job_id] = sc
            if len(self._ctx) > self.capacity:
                self._ctx.popitem(last=False)

    def get(self, job_id: str) -> SpanContext | None:
        return self._ctx.get(job_id)

    def forget(self, job_id: str) -> None:
        self._ctx.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._ctx)


class StepTrace:
    """One scheduling step of one cluster: the step span and one ``schedule job`` span per
    decided job. :meth:`decide` also records the decision latency metric."""

    def __init__(self, cluster: str, policy: str, jobs: JobTraces, pending: int) -> None:
        self.policy, self.jobs = policy, jobs
        self.start_ns = time.time_ns()
        self.span = tracer().start_span("schedule step", kind=SpanKind.INTERNAL, start_time=self.start_ns,
                                        attributes={"semsched.cluster": cluster, "semsched.policy": policy,
                                                    "semsched.pending": pending})  # fmt: skip
        sc = self.span.get_span_context()
        self._links = [Link(sc)] if sc.is_valid else []
        self._decided: list[Span] = []
        self._acknowledged = 0  # of _decided, those told so

    def decide(self, job_id: str, decision_id: str, *, outcome: str, latency_ms: float,
               node_id: str | None = None) -> Headers:  # fmt: skip
        """Start the job's ``schedule job`` span; returns the headers for its decision and command."""
        record_decision(latency_ms, policy=self.policy, outcome=outcome)
        attrs = {"semsched.job_id": job_id, "semsched.decision_id": decision_id, "semsched.outcome": outcome,
                 "semsched.latency_ms": latency_ms, "semsched.node_id": node_id}  # fmt: skip
        span = tracer().start_span("schedule job", context=context_of(self.jobs.get(job_id)),
                                   kind=SpanKind.PRODUCER, links=self._links, start_time=self.start_ns,
                                   attributes={k: v for k, v in attrs.items() if v is not None})  # fmt: skip
        if outcome != "placed":
            self.jobs.forget(job_id)
        self._decided.append(span)
        return inject(span)

    def acknowledged(self) -> None:
        """The broker has every decision of the step handed over so far (commands go out next): once
        each (a step settles its DAG gate's rejections, then its placements)."""
        for span in self._decided[self._acknowledged:]:
            span.add_event("decision acknowledged")
        self._acknowledged = len(self._decided)

    def end(self, error: BaseException | None = None, **attrs: Any) -> None:
        for span in self._decided:
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            span.end()
        self.span.set_attributes({"semsched.decided": len(self._decided),
                                  **{f"semsched.{k}": v for k, v in attrs.items()}})  # fmt: skip
        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.span.end()


@contextlib.contextmanager
def step_trace(cluster: str, policy: str, jobs: JobTraces, pending: int) -> Iterator[StepTrace]:
    st = StepTrace(cluster, policy, jobs, pending)
    try:
        yield st
    except BaseException as e:
        st.end(error=e)
        raise
    st.end()


def start_execute(topic: str, headers: Any, *, job_id: str, decision_id: str, node_id: str) -> Span:
    """An agent received a placement command: the ``execute job`` span, ended by :func:`end_execute`."""
    return tracer().start_span("execute job", context=extract(headers), kind=SpanKind.CONSUMER,
                               attributes=_kafka(topic, **{"semsched.job_id": job_id,
                                                           "semsched.decision_id": decision_id,
                                                           "semsched.node_id": node_id}))  # fmt: skip


def end_execute(span: Span | None, state: str, reason: str | None = None) -> None:
    if span is None:
        return
    span.set_attribute("semsched.state", state)
    if state != "finished":
        span.set_status(Status(StatusCode.ERROR, reason or state))
    span.end()


@contextlib.contextmanager
def archive_span(table: str, rows: int, links: list[SpanContext]) -> Iterator[Span]:
    """Around one batch write to the archive, linked to the records that carried a context."""
    with tracer().start_as_current_span("archive write", context=context_of(None), kind=SpanKind.INTERNAL,
                                        links=[Link(sc) for sc in links],
                                        attributes={"db.system": "clickhouse", "db.collection.name": table,
                                                    "semsched.rows": rows,
                                                    "semsched.linked_records": len(links)}) as span:  # fmt: skip
        yield span
