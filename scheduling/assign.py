"""The assign phase: one scheduling step, from pending jobs to conflict-free placements.

``schedule_step`` works on a copy of the snapshot and takes the jobs in the policy's
order. For each: filter (all nodes at once), score (vectorised), take the best node
(ties → lowest index), pick its GPUs (best-fit per GPU) and reserve them, so later jobs
in the same step see the reduced capacity. Within a step, free capacity only shrinks, so
once a job's shape (resources, GPU models, cluster, app limits) has no feasible node, a
later job of the same shape is not filtered again: it gets the same reason. Gangs are all-or-nothing within the step:
members are placed one after another and, if one fails, the partial reservations are
rolled back. A job with no feasible node is reported with the kube-style filter reason;
``permanent`` when it could not fit even the empty cluster.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence

import numpy as np

from scheduling.filters.base import Filter
from scheduling.filters.framework import filter_shape, never_fits, run_filters
from scheduling.gang import gang_never_fits, gang_problem, group_gangs
from scheduling.gpu_select import select_gpus
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.policies.base import Policy
from scheduling.snapshot import ClusterSnapshot
from scheduling.step_result import Placement, StepResult, Unschedulable

__all__ = ["Placement", "StepResult", "Unschedulable", "place_one", "schedule_step", "top_candidates"]

_now = time.perf_counter  # (the hold's clock)


def schedule_step(snapshot: ClusterSnapshot, pending: Sequence[JobRequest], policy: Policy, *, now: float,
                  top_k: int = 3, max_placements: int | None = None,
                  filters: Sequence[Filter] | None = None, context: OrderContext | None = None,
                  in_order: bool = False, hold_s: float | None = None) -> StepResult:  # fmt: skip
    """Place as many of ``pending`` as fit, conflict-free. ``snapshot`` is not modified.

    ``max_placements`` caps the placements of this step; jobs not considered because of
    it are listed in ``StepResult.deferred`` (a gang is never split by the cap, but one
    larger than the cap may still go first in a step). ``context`` is handed to the policy's
    ordering (tenant shares, attained service, a duration predictor). ``in_order``: ``pending``
    already comes in the policy's order (:func:`scheduling.orderings.compose.queue_order`, which
    the worker computes once per step for a model-backed placement's call): it is not ordered
    again (an ordering may have state, such as a predictor's refresh budget), and a placement
    with per-step state is told the step began (``begin_step``), as ``order`` would. ``hold_s``: once
    the step has spent that long on placements it made, the jobs not considered yet are listed in
    ``deferred`` for the next step (a gang is never split; jobs of a shape already found to fit nowhere
    are still decided, at no cost): a worker's step runs on its event loop, which waits meanwhile (2,000
    placements held it ~2.7 s, found by ``semsched bench triton --burst``). Only placements count, not
    the jobs that did not fit: those stay pending and are decided again at every step, so a costly
    blocked head of the queue counted would cut every step at the same point and starve the jobs that
    fit behind it (found by review). The ordering (done by the caller with ``in_order``) is not counted.
    """
    started = time.perf_counter()
    placing = 0.0  # seconds spent on the placements made (what ``hold_s`` bounds)
    snap = snapshot.copy()
    unique: dict[str, JobRequest] = {}
    for job in pending:
        unique.setdefault(job.job_id, job)
    if in_order:
        ordered = list(unique.values())
        begin = getattr(policy, "begin_step", None)  # (a composed policy's is its placement's)
        if begin is not None:
            begin(ordered, now)
    else:
        ordered = policy.order(list(unique.values()), now, context)
    gangs = group_gangs(ordered)
    handled: set[str] = set()
    result = StepResult(order=[j.job_id for j in ordered])
    no_fit: dict[tuple, Unschedulable] = {}  # shape -> the first such job's outcome

    def over_budget(need: int) -> bool:
        if max_placements is None:
            return False
        done = len(result.placements)
        return done >= max_placements or (done > 0 and done + need > max_placements)

    def held() -> bool:
        return hold_s is not None and bool(result.placements) and placing >= hold_s

    for job in ordered:
        if job.gang_id not in gangs:
            if over_budget(1):
                result.deferred.append(job.job_id)
                continue
            shape = filter_shape(job)  # (the default filters read nothing else: a custom chain may)
            known = no_fit.get(shape) if filters is None else None
            if known is not None:
                result.unschedulable.append(known.for_job(job.job_id))
                continue
            if held():
                result.deferred.append(job.job_id)
                continue
            t0 = _now()
            outcome = place_one(snap, job, policy, top_k=top_k, filters=filters)
            if isinstance(outcome, Placement):
                result.placements.append(outcome)
                placing += _now() - t0
            else:
                result.unschedulable.append(outcome)
                if outcome.filtered_out:
                    no_fit[shape] = outcome
            continue
        gang_id = job.gang_id
        assert gang_id is not None
        if gang_id in handled:
            continue
        handled.add(gang_id)
        members = gangs[gang_id]
        problem = gang_problem(gang_id, members)
        if problem is not None:
            reason, permanent = problem
            result.unschedulable.extend(Unschedulable(m.job_id, reason, permanent) for m in members)
        elif over_budget(len(members)) or held():
            result.deferred.extend(m.job_id for m in members)
        else:
            t0, placed = _now(), len(result.placements)
            _place_gang(snap, gang_id, members, policy, top_k, filters, result)
            if len(result.placements) > placed:  # (a gang that did not fit whole counts as a job that did not fit)
                placing += _now() - t0
    result.compute_ms = (time.perf_counter() - started) * 1000.0
    return result


def place_one(snap: ClusterSnapshot, job: JobRequest, policy: Policy, *, top_k: int = 3,
              filters: Sequence[Filter] | None = None) -> Placement | Unschedulable:  # fmt: skip
    """Filter, score and reserve the best node for ``job`` on ``snap`` (mutated on success)."""
    feasible = run_filters(job, snap, filters, explain=False).feasible_mask
    count = int(np.count_nonzero(feasible))
    if count == 0:
        return dataclasses.replace(_unschedulable(job, snap, filters), filtered_out=True)
    scores = np.asarray(policy.score(job, snap, feasible), dtype=np.float64)
    if scores.shape != feasible.shape:
        raise ValueError(f"policy {policy.name} returned scores of shape {scores.shape}, "
                         f"expected {feasible.shape}")  # fmt: skip
    masked = np.where(feasible & ~np.isnan(scores), scores, -np.inf)
    choose_gpus = getattr(policy, "select_gpus", None) or select_gpus  # a policy may pick GPUs itself
    while True:
        best = int(np.argmax(masked))
        if masked[best] == -np.inf:
            nan = int(np.count_nonzero(feasible & np.isnan(scores)))
            how = f"{nan} scored NaN (a policy error), the rest -inf (vetoed)" if nan else "scored -inf (vetoed)"
            return Unschedulable(job.job_id, f"{policy.name}: all {count} feasible node(s) {how}")
        gpus = choose_gpus(snap, best, job)
        if gpus is not None:
            break
        masked[best] = -np.inf  # only reachable with a custom filter chain lacking gpu_share
    snap.reserve(best, job, gpus)
    score = float(masked[best])
    return Placement(
        job_id=job.job_id,
        node_index=best,
        node_id=str(snap.node_ids[best]),
        gpu_indices=gpus,
        score=score,
        candidates=top_candidates(masked, snap.node_ids, top_k),
        feasible_nodes=count,
        reason=f"{policy.name}: highest score {score:.4g} of {count} feasible node(s)",
    )


def top_candidates(masked: np.ndarray, node_ids: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The ``k`` best ``(node_id, score)`` pairs, best first, ties → lowest index; ``-inf`` and NaN excluded,
    ``+inf`` recorded as the largest float (found by review: JSON has no inf, so a decision record carrying
    one was refused by every reader, and the placement was missing from the archive)."""
    out: list[tuple[str, float]] = []
    taken: list[tuple[int, float]] = []
    for _ in range(len(masked)):
        if len(out) >= k:
            break
        i = int(np.argmax(masked))
        score = float(masked[i])
        if score == -np.inf:
            break
        taken.append((i, score))
        masked[i] = -np.inf
        if score != score:  # NaN (argmax finds it first): no score to record
            continue
        out.append((str(node_ids[i]), min(score, float(np.finfo(np.float64).max))))
    for i, score in taken:  # restore the caller's array
        masked[i] = score
    return out


def _unschedulable(job: JobRequest, snap: ClusterSnapshot, filters: Sequence[Filter] | None) -> Unschedulable:
    why_never = never_fits(job, snap, filters)
    if why_never is not None:
        return Unschedulable(job.job_id, why_never, permanent=True)
    return Unschedulable(job.job_id, run_filters(job, snap, filters).reason, permanent=False)


def _place_gang(snap: ClusterSnapshot, gang_id: str, members: list[JobRequest], policy: Policy, top_k: int,
                filters: Sequence[Filter] | None, result: StepResult) -> None:  # fmt: skip
    """All members or none. Members go one at a time in the step's order, and, when that fails, once
    more largest first (GPU demand, cpu, memory): a small member placed first can take the only node
    a large one fits (found by review: a launcher of 1 GPU put on an idle 4-GPU node left no room for
    its 4-GPU worker, step after step, under fgd, fifo-first-fit and least-allocated); then, when
    that fails too, the member with the fewest feasible nodes first (found by review: a member of any
    GPU model took the one A10 node its A10-only peer needed, at every step)."""
    largest_first = sorted(members, key=lambda m: (m.gpu_demand_milli, m.cpu_milli, m.memory_mib), reverse=True)
    failed: tuple[JobRequest, Unschedulable, int] | None = None
    tried: list[list[JobRequest]] = []
    for order in _gang_orders(snap, members, largest_first, filters):
        if order in tried:
            continue
        tried.append(order)
        got = _try_gang(snap, order, policy, top_k, filters)
        if isinstance(got, list):
            size, number = len(members), {id(m): i for i, m in enumerate(members, start=1)}
            result.placements.extend(
                dataclasses.replace(p, reason=f"{p.reason} (gang {gang_id}, member {number[id(m)]}/{size})")
                for p, m in sorted(got, key=lambda pm: number[id(pm[1])])
            )
            return
        failed = got if got[1].permanent else failed or got  # the step's order's reason, unless one never fits
        if got[1].permanent:  # a member that never fits: no order helps
            break
    assert failed is not None
    member, outcome, before = failed
    why = (f"gang {gang_id}: member {member.job_id} cannot be placed"
           f"{f' (with {before} of its members placed first)' if before else ''}: {outcome.reason}")  # fmt: skip
    permanent = outcome.permanent
    if not permanent and filters is None and (never := gang_never_fits(gang_id, members, snap)):
        why, permanent = never, True
    result.unschedulable.extend(Unschedulable(m.job_id, why, permanent) for m in members)


def _gang_orders(snap: ClusterSnapshot, members: list[JobRequest], largest_first: list[JobRequest],
                 filters: Sequence[Filter] | None) -> Iterator[list[JobRequest]]:  # fmt: skip
    """The orders :func:`_place_gang` tries, each computed only when the one before failed."""
    yield members
    yield largest_first
    room = {id(m): int(run_filters(m, snap, filters, explain=False).feasible_mask.sum()) for m in members}
    yield sorted(largest_first, key=lambda m: room[id(m)])  # (stable: the largest first among equals)


def _try_gang(snap: ClusterSnapshot, order: list[JobRequest], policy: Policy, top_k: int,
              filters: Sequence[Filter] | None) -> list[tuple[Placement, JobRequest]] | tuple[JobRequest, Unschedulable, int]:  # fmt: skip
    """The members placed in ``order`` (reserved on ``snap``), or, rolled back, the member that did not
    fit, why, and how many were placed before it."""
    placed: list[tuple[Placement, JobRequest]] = []
    for member in order:
        outcome = place_one(snap, member, policy, top_k=top_k, filters=filters)
        if isinstance(outcome, Unschedulable):
            for placement, job in reversed(placed):
                snap.free(placement.node_index, job, placement.gpu_indices)
                forget_placement(policy, snap, placement.node_index, job)
            return member, outcome, len(placed)
        placed.append((outcome, member))
    return placed


def forget_placement(policy: Policy, snap: ClusterSnapshot, node_index: int, job: JobRequest) -> None:
    """Tell a policy that keeps state about its placements that one was rolled back (``forget``,
    :mod:`scheduling.policies.base`)."""
    forget = getattr(policy, "forget", None)
    if forget is not None:
        forget(snap, node_index, job)
