"""Decision-time lookahead through the transition model T (issue 4 point 3: "a transition model
h_{t+k} = T(h_{t+k-1}, a_{t+k-1}) for k-step lookahead").

Within a scheduling step the ``learned`` policy places the pending jobs one after another, in
the step's order. For a job with more than one feasible node, :meth:`Lookahead.adjust` tries its
``width`` best-scored nodes. For each candidate node c:

1. the placement is applied to a copy of the snapshot (exactly: the resources it takes, GPUs by
   best fit, as the policy places them) and to the representation through T: h_1 = T(h_0, (job, c));
2. the next ``depth`` jobs of the step's order that can be placed now (those the step has not
   scored yet that the default filters let onto some node, :mod:`scheduling.filters.fits_somewhere`:
   a job that fits nowhere now fits nowhere on any candidate's path, and would only take a rolled
   job's place; gang jobs are left out, as a gang is placed whole when its first member comes) are placed greedily, each on
   the policy head's best node under the predicted h_k (its node part recomputed from h_k) and
   the copy's exact pair features, less ``stability`` · Δ under h_k for a model that damps churn
   (as the policy decides); h_{k+1} = T(h_k, a_k);
3. the path cost is the cost estimator's ψ summed over the path (the fragmentation each placement
   adds, in GPUs), plus the GPUs asked for by the next jobs the path leaves without a node (the
   scheduler's default filters, :func:`scheduling.filters.framework.run_filters`, on the copy; a
   CPU-only job left without a node costs nothing: every cost here is in GPUs).

The candidate's score is lowered by ``weight`` × (its path cost − the cheapest candidate's) (a
candidate whose path could not be rolled, its cost not a finite number, is vetoed: ``-inf``), so
the policy's pick changes where the model predicts that another of its ``width`` best nodes
leaves the next jobs a cheaper cluster by more than (score gap) / ``weight`` GPUs. The default,
100,000, makes the cheapest predicted path win among the candidates (the serving model's best and
next scores are 14–23 apart, the paths' costs within 0.1 GPU of each other: a weight of 1 never
changed a pick in three 64-job steps; on the openb replay the mean queueing was 45.9, 45.7, 44.6 and
44.5 s at 100, 300, 1,000 and 100,000, within that replay's noise). Needs a model with both a cost
head and a transition head (``semsched train``'s default); h_0 is the step's encoder output
(recomputed locally once a step from the step's inputs, so a Triton step needs nothing more on
the wire). The policy's own later decisions in the step score on that step-start h (with each
node's pair features current), the rollouts on T's prediction of it; for the serving model the
two agree (a fresh model call before each of 768 placements in three 256-job steps changed none).
A rollout that fails leaves the decision to the plain scores (logged, counted in ``errors``).
:meth:`Lookahead.explain` words what a decision's rollouts found for its decision record; a decision
the plain scores made instead (rollouts failed, ``per_step`` reached, a model without ψ or T, a
step answered by a version this worker does not hold) has a note on its record that says so.

**Cost.** Each rolled decision costs ``width`` × ``depth`` pair-feature updates, head and ψ calls
and T steps (about 6 ms at 4 × 2 on the 1,213 openb nodes). A step rolls at most ``per_step``
decisions (in the step's order; the rest are the plain policy's), so a long queue does not make
the worker's step take seconds; a count, not a time, so that a replay decides the same on any
machine.

Registered here as the ``learned-lookahead`` placement (the ``learned`` policy,
:class:`inference.policy.LearnedPolicy`, with a :class:`Lookahead`); settings
``SEMSCHED_LOOKAHEAD_DEPTH`` (2), ``SEMSCHED_LOOKAHEAD_WIDTH`` (4), ``SEMSCHED_LOOKAHEAD_WEIGHT``
(100,000) and ``SEMSCHED_LOOKAHEAD_PER_STEP`` (64; 0 = every decision). Taking as candidates the
best node of each distinct node state instead (as :mod:`inference.training.lookahead`'s teacher
does) queued alike on the openb replays and left the GPUs more fragmented (a time-mean
fragmentation rate of 0.43–0.48 against 0.30–0.35): it was tried and taken out.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.features.pair_cache import PairCache
from inference.features.spec import FeatureSpec
from scheduling.events import cut_text
from scheduling.fill import gpu_demand
from scheduling.filters.fits_somewhere import FitsSomewhere
from scheduling.filters.framework import run_filters
from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.policies.registry import register
from scheduling.snapshot import ClusterSnapshot

log = logging.getLogger("semsched.lookahead")

ENV = {"depth": "SEMSCHED_LOOKAHEAD_DEPTH", "width": "SEMSCHED_LOOKAHEAD_WIDTH", "weight": "SEMSCHED_LOOKAHEAD_WEIGHT",
       "per_step": "SEMSCHED_LOOKAHEAD_PER_STEP"}  # fmt: skip


@dataclass
class LookaheadStats:
    decisions: int = 0  # jobs whose candidates were rolled out
    changed: int = 0  # of those, where the lookahead moved the best-scored node
    rollouts: int = 0  # candidate paths rolled
    stranded: int = 0  # next jobs a rolled path left without a node
    capped: int = 0  # decisions not rolled: their step had rolled ``per_step`` already
    errors: int = 0  # decisions whose rollouts failed (the plain scores decided)


@dataclass
class Lookahead:
    depth: int = 2  # next jobs of the step's order rolled after each candidate (1..8)
    width: int = 4  # best-scored candidate nodes tried (2..16)
    weight: float = 100_000.0  # score units per GPU of predicted path cost
    per_step: int = 64  # decisions rolled per step at most (0: all)
    stats: LookaheadStats = field(default_factory=LookaheadStats, compare=False)
    _rolled: int = field(default=0, compare=False, repr=False)  # in the current step
    _fits: FitsSomewhere = field(default_factory=FitsSomewhere, compare=False, repr=False)  # the current step's
    last: tuple[np.ndarray, np.ndarray] | None = field(default=None, compare=False, repr=False)  # candidates, costs

    def __post_init__(self) -> None:
        if not 1 <= self.depth <= 8:
            raise ValueError(f"lookahead depth must be within 1..8, not {self.depth}")
        if not 2 <= self.width <= 16:
            raise ValueError(f"lookahead width must be within 2..16, not {self.width}")
        if not (self.weight >= 0 and np.isfinite(self.weight)):
            raise ValueError(f"lookahead weight must be a finite number >= 0, not {self.weight}")
        if self.per_step < 0:
            raise ValueError(f"lookahead per_step must be >= 0, not {self.per_step}")

    def begin_step(self) -> None:
        self._rolled, self._fits = 0, FitsSomewhere()

    def capacity_returned(self) -> None:
        """The step gave resources back (a gang rolled back): what fit nowhere is asked again."""
        self._fits = FitsSomewhere()

    def failed(self, job_id: str, error: Exception) -> None:
        """A decision's rollouts raised: the plain scores decide it (logged once per 100 failures)."""
        if self.stats.errors % 100 == 0:
            log.warning("lookahead for job %s failed (%s: %s); the plain scores decide (%d such decisions)",
                        job_id, type(error).__name__, error, self.stats.errors + 1)  # fmt: skip
        self.stats.errors += 1

    @classmethod
    def from_env(cls) -> Lookahead:
        """From ``SEMSCHED_LOOKAHEAD_*`` (unset: the defaults); a malformed value raises ValueError
        naming the variable."""
        values: dict[str, Any] = {}
        for key, var in ENV.items():
            raw = os.environ.get(var, "").strip()
            if not raw:
                continue
            try:
                values[key] = float(raw) if key == "weight" else int(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not {'a number' if key == 'weight' else 'an integer'}") from None
        try:
            return cls(**values)
        except ValueError as e:
            raise ValueError(f"{', '.join(ENV.values())}: {e}") from None

    def in_step(self, model: Any, step: Any, job: JobRequest, scores: np.ndarray, snapshot: ClusterSnapshot,
                later: Iterable[JobRequest], spec: FeatureSpec, caches: Any,
                row_of: Callable[[JobRequest], np.ndarray] | None = None) -> tuple[np.ndarray, str | None]:  # fmt: skip
        """:meth:`adjust` for ``job`` within a step of the ``learned`` policy (``step``: its
        :class:`~inference.prepared_step.PreparedStep`; ``later``: the step's jobs after ``job`` in
        its order not yet scored; ``caches``: the policy's :class:`~inference.step_caches.StepCaches`;
        ``row_of``: a later job's feature row, for jobs beyond ``step``'s call — its model window),
        and the decision record's note. The next ``depth`` of
        ``later`` that fit somewhere on ``snapshot`` are rolled (without ``row_of``, of those ``step``'s call
        scored); gang jobs are left out, as a gang is placed
        whole when its first member comes. Unchanged for a job the step's call did not score, for a
        model without ψ and T, past ``per_step`` rolled decisions, and when the rollouts fail (logged,
        counted); the note then says so (the record would read as a looked-ahead decision otherwise).
        No note where there was nothing to look ahead over (one feasible node, no later job that fits
        somewhere): the plain scores are the lookahead's answer there."""
        i = step.index.get(job.job_id)
        if i is None:
            return scores, None
        missing = heads_missing(model)
        if missing:
            return scores, f"lookahead off: the model has no {missing}; the plain scores decide"
        if row_of is None:  # the step's call's rows only
            later = (j for j in later if j.job_id in step.index)
        self.last = None
        capped = self.stats.capped
        try:  # (a later job's row too: its text may fail to encode)
            rolled = self._fits.first((j for j in later if not j.is_gang), snapshot, self.depth)
            upcoming = [(j, row_of(j) if row_of is not None else step.jobs[step.index[j.job_id]]) for j in rolled]
            if not upcoming:
                return scores, None
            out = self.adjust(model, step.h(model, caches.topologies), step.node_part, job, step.jobs[i], scores,
                              snapshot, upcoming, spec, caches.pair_cache(snapshot, lookahead=True))  # fmt: skip
        except Exception as e:  # the plain scores decide; the step goes on
            self.failed(job.job_id, e)
            error = f"{type(e).__name__}: {e}"  # (cut: the note goes into a record's reason)
            return scores, f"lookahead failed ({cut_text(error, 200)}); the plain scores decide"
        if self.stats.capped > capped:
            return out, (f"lookahead not run: the step rolled {self.per_step} decisions already "
                         f"({ENV['per_step']}); the plain scores decide")  # fmt: skip
        return out, (self.explain(snapshot, out, len(upcoming)) if self.last is not None else None)

    def adjust(self, model: Any, h: np.ndarray, node_part: np.ndarray, job: JobRequest, job_row: np.ndarray,
               scores: np.ndarray, snapshot: ClusterSnapshot, upcoming: Sequence[tuple[JobRequest, np.ndarray]],
               spec: FeatureSpec, cache: PairCache) -> np.ndarray:  # fmt: skip
        """``scores`` (float64 ``[N]``, ``-inf`` where infeasible) with the ``width`` best lowered by
        their path costs; ``h [N, H]`` and ``node_part [N, W]``: the step's; ``upcoming``: the next jobs
        of the step's order with their feature rows; ``cache``: a pair cache of the lookahead's own
        (the rollouts' copies differ from the snapshot on a node or two)."""
        finite = np.flatnonzero(np.isfinite(scores))
        if len(finite) < 2 or not upcoming:
            return scores
        if self.per_step and self._rolled >= self.per_step:
            self.stats.capped += 1
            return scores
        candidates = finite[np.argsort(-scores[finite], kind="stable")][: self.width]
        self._rolled += 1
        costs = self.path_costs(model, h, node_part, job, job_row, candidates, snapshot, upcoming[: self.depth],
                                spec, cache)  # fmt: skip
        out = scores.copy()
        if np.isfinite(costs).any():  # (none rolled: the plain scores decide)
            out[candidates] -= self.penalties(costs)
        self.last = (candidates, costs)
        self.stats.decisions += 1
        self.stats.changed += int(candidates[int(np.argmax(out[candidates]))] != candidates[0])
        return out

    def penalties(self, costs: np.ndarray) -> np.ndarray:
        """What each candidate's score loses: ``weight`` × (its path cost − the least), with at least one
        finite cost. A candidate whose path could not be rolled (NaN: no GPUs fit there; or a ψ that
        diverged, ±inf) loses everything (``-inf``: vetoed), as its cost is unknown, not nothing; with a
        weight of 0 no candidate loses anything."""
        rolled = np.isfinite(costs)
        if not self.weight:
            return np.zeros_like(costs)
        return np.where(rolled, self.weight * (costs - costs[rolled].min()), np.inf)

    def explain(self, snapshot: ClusterSnapshot, scores: np.ndarray, looked: int) -> str:
        """The decision record's note for the last :meth:`adjust` (``scores``: what it returned), worded
        from the candidates' costs: the pick's is the least, or the score gap outweighed the difference."""
        assert self.last is not None
        candidates, costs = self.last
        names = snapshot.node_ids
        note = f"lookahead over the next {looked} job(s) through T: "
        rolled = np.isfinite(costs)
        unrolled = int(np.count_nonzero(~rolled))
        if unrolled == len(candidates):
            return note + f"none of the {len(candidates)} candidates could be rolled; the plain scores decide"
        cost = {int(c): float(x) for c, x in zip(candidates, costs, strict=True)}
        best, head, cheapest = (int(candidates[int(np.argmax(scores[candidates]))]), int(candidates[0]),
                                int(candidates[int(np.argmin(np.where(rolled, costs, np.inf)))]))  # fmt: skip

        def worded(node: int) -> str:
            return f"{cost[node]:.3f} GPU" if np.isfinite(cost[node]) else "not rolled"

        if not np.isfinite(cost[best]):  # (a weight of 0 only: else it is vetoed)
            note += f"{names[best]} kept on its score, its path not rolled"
        elif cost[best] <= cost[cheapest]:
            note += f"predicted path cost {worded(best)} on {names[best]}, the least of {len(candidates)} candidates"
        else:  # (a small weight: the head's score gap outweighed the cost difference)
            note += (f"predicted path cost {worded(best)} on {names[best]}, not the least of {len(candidates)} "
                     f"candidates ({worded(cheapest)} on {names[cheapest]}): its score was ahead by more than the "
                     "weight times the difference")  # fmt: skip
        if head != best:
            note += f" (the head's best, {names[head]}: {worded(head)})"
        if unrolled:
            note += f"; {unrolled} candidate(s) could not be rolled"
        return note

    def path_costs(self, model: Any, h: np.ndarray, node_part: np.ndarray, job: JobRequest, job_row: np.ndarray,
                   candidates: np.ndarray, snapshot: ClusterSnapshot,
                   upcoming: Sequence[tuple[JobRequest, np.ndarray]], spec: FeatureSpec,
                   cache: PairCache) -> np.ndarray:  # fmt: skip
        """float64 ``[len(candidates)]``: the predicted cost, in GPUs, of placing ``job`` on each
        candidate and the ``upcoming`` jobs greedily after it (module docstring)."""
        import torch

        from inference.model.scorer import Action
        from inference.model.step import stability

        damp = stability(model)  # the weight of Δ in the policy's decisions (0: none)
        first = cache.pairs([job], snapshot, spec)[0]  # [N, P] on the current state
        row = torch.from_numpy(np.asarray(job_row, np.float32))
        nxt = [(j, torch.from_numpy(np.asarray(r, np.float32))) for j, r in upcoming]
        start = torch.from_numpy(np.asarray(h, np.float32))[None]
        parts = torch.from_numpy(np.asarray(node_part, np.float32))
        costs = np.zeros(len(candidates), np.float64)
        with torch.inference_mode():
            pair = torch.from_numpy(first[candidates])
            costs += model.cost(parts[candidates], row, pair)[:, 0].double().numpy()
            for c, node in enumerate(candidates.tolist()):
                gpus = best_fit_gpus(snapshot, node, job)
                if gpus is None:  # the filters let it through, but no GPUs fit (a chain without the GPU filter)
                    costs[c] = np.nan
                    continue
                self.stats.rollouts += 1
                sim = snapshot.copy()
                sim.reserve(node, job, gpus, check=False)
                state = model.transition(start, Action(row[None], torch.tensor([node]), pair[c][None]))
                for other, other_row in nxt:
                    fits = np.flatnonzero(run_filters(other, sim, explain=False).feasible_mask)
                    if not len(fits):
                        self.stats.stranded += 1
                        costs[c] += gpu_demand(other) / 1000.0
                        continue
                    rows = torch.from_numpy(cache.pairs([other], sim, spec)[0][fits])
                    node_rows = model.head.precompute(state[0, fits])
                    scores = model.head.score(node_rows, other_row, rows)
                    if damp:  # the policy's own pick damps churn (Scorer.decide): so does the rollout's
                        scores = scores - damp * model.delta(state[0, fits], other_row, rows)
                    best = int(torch.argmax(scores))
                    costs[c] += float(model.cost(node_rows[best][None], other_row, rows[best][None])[0, 0])
                    target = int(fits[best])
                    sim.reserve(target, other, best_fit_gpus(sim, target, other) or (), check=False)  # (feasible)
                    state = model.transition(state, Action(other_row[None], torch.tensor([target]), rows[best][None]))
        return costs


def heads_missing(model: Any) -> str:
    """What the lookahead needs that ``model`` lacks (``"cost head (ψ)"``, ``"transition head (T)"``,
    both joined by "and"), or ``""``."""
    need = (("cost_head", "cost head (ψ)"), ("transition_head", "transition head (T)"))
    return " and ".join(what for name, what in need if getattr(model, name, None) is None)


@register("learned-lookahead")
def learned_lookahead(**kwargs: Any) -> Any:
    """The ``learned`` placement (:class:`inference.policy.LearnedPolicy`, which imports this module)
    with its decisions rolled forward through T, settings from ``SEMSCHED_LOOKAHEAD_*``."""
    from inference.policy import LearnedPolicy

    return LearnedPolicy(lookahead=kwargs.pop("lookahead", None) or Lookahead.from_env(), **kwargs)
