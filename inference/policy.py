"""``learned``: the trained scorer as a scheduling policy (issue 4), in-process or on Triton.

FIFO order; ``score(job, snapshot, feasible_mask)`` = the policy head's scores over every
node, infeasible nodes at ``-inf``. Registered in the placement registry as ``learned`` when
:mod:`inference` is imported (``scheduling`` never imports ``inference``).

**The model** comes from ``model_dir`` (default ``$SEMSCHED_MODEL_DIR``, else
``models/latest``) and runs on a backend (:mod:`inference.backends`: ``in-process``, the
default, or ``triton``; ``$SEMSCHED_INFERENCE``). If it cannot be loaded at all, the policy
falls back to a heuristic (``fallback="fgd"``, its kwargs in ``fallback_kwargs``) for every
call and says so: ``fell_back``, ``fallback_reason``, ``model_version = None``
(:mod:`inference.served_model`). What the decision records read after a step (ψ, the version that
scored a job) is :mod:`inference.decision_estimates`.

**One model call per step** (per window of it). The step's inputs
(:func:`inference.model.step.build_inputs`: node state, topology, the pending jobs, pair features
per distinct resource shape) go to the backend once; it answers the scores of every (job, node) where the job's shape fits by
resources (:mod:`inference.features.fits`; ``-inf`` elsewhere) on the step-start state, and the
head's node term. A node that the filters accept but the model did not score (a filter chain
without the health filter, say) is scored within the step. The pair features are kept from step to step
(:class:`inference.features.pair_cache.PairCache`): only the nodes whose free capacity changed
since the last step, and the shapes not seen before, are computed. Then, while ``schedule_step``
reserves jobs one by one, the nodes whose pair features an earlier placement of the same step moved
are re-scored for each later job with the local copy of the head (:mod:`inference.rescoring`):
every score sees the nodes' current free capacity, on the step-start embeddings (the fusion
encoder's h and the head's node term are not recomputed within a step).

- **The window** (:mod:`inference.step_windows`): a call covers at most ``window`` jobs of
  the step's order that fit somewhere (default 256, ``$SEMSCHED_MODEL_WINDOW``; 0: the whole
  queue); a job past it
  that reaches scoring opens the next window synchronously (only the step's first call looks
  for a new version, so one version decides the step). A served encoder embeds the window's
  new texts before the call and the queue's past it after the answer, within the step's
  deadline (:meth:`inference.step_call.StepCaller.within`). On a remote backend the windows
  opened later share what is left of that deadline, their texts embedded by the server too; once
  it is spent the fallback decides the rest of the step (:mod:`inference.step_budget`).
- The worker awaits :meth:`prepare_step` before ``schedule_step`` (async: the Triton call
  has a deadline and must not block the event loop). If the backend fails — Triton down,
  the deadline missed — the step is decided by the fallback heuristic and
  :attr:`last_step` says so (the worker writes it on the step's decision records).
- Callers without an event loop (the simulator, most benchmarks) skip ``prepare_step``: the
  first ``score`` of a step (``order()`` marks the start) calls the backend synchronously.
- A caller that never calls ``order()`` and scores jobs one by one on one long-lived
  snapshot (the fill benchmark, ``scheduling.fill.run_fill``) gets a fresh model call every
  ``refresh_every`` scores (default 1: each placement sees embeddings of the current state,
  as in training), with the job's own time as ``now`` and no queue summary.

GPUs inside the chosen node: best fit (:func:`scheduling.gpu_select.select_gpus`) — what the
pair features assume; in a fallen-back step, the fallback's own choice.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inference.decision_estimates import DecisionEstimates
from inference.encoders import EncoderCache
from inference.features.jobs import job_demand
from inference.features.pair_cache import PairCache
from inference.lookahead import Lookahead, heads_missing
from inference.prepared_step import PreparedStep, StepStatus
from inference.rescoring import moved_nodes, rescore
from inference.served_model import ServedModel
from inference.server_backoff import ServerBackoff
from inference.step_budget import MIN_CALL_MS, StepBudget
from inference.step_caches import StepCaches
from inference.step_call import StepCaller, embed_texts_now
from inference.step_windows import StepWindows, fitting_window, model_window
from scheduling.filters.fits_somewhere import FitsSomewhere
from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.policies.base import BasePolicy, Policy
from scheduling.policies.registry import get_policy, register
from scheduling.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

MODEL_DIR_ENV = "SEMSCHED_MODEL_DIR"
DEFAULT_MODEL_DIR = Path("models/latest")
STEP_STATE = ("_prepared", "_step", "_windows", "_utilisation", "_budget", "_step_fallback", "_in_step", "_calls", "model_calls",
              "last_step", "fallback_jobs", "decision_notes", "_fallback_gpus")  # what a step changes (warm_up puts it back)  # fmt: skip


#: the placements that decide with the learned model (and so take a fallback heuristic)
LEARNED_PLACEMENTS = frozenset({"learned", "learned-lookahead"})


def failure_reason(e: Exception) -> str:
    """What a step's record says when its model call failed: a backend's own message, else the error."""
    from inference.backends import BackendError

    return str(e) if isinstance(e, BackendError) else f"{type(e).__name__}: {e}"


def server_failed(e: Exception) -> bool:
    """Whether a failed step call was the model server's (its error, a missed deadline), not the inputs'."""
    from inference.backends import BackendError

    return isinstance(e, BackendError | TimeoutError)


def uses_learned(policy: str) -> bool:
    """Does this policy (``<placement>`` or ``<ordering>+<placement>``) place with the learned model?"""
    return policy.split("+")[-1].strip() in LEARNED_PLACEMENTS


def default_model_dir() -> Path:
    return Path(os.environ.get(MODEL_DIR_ENV) or DEFAULT_MODEL_DIR)


@register("learned")
class LearnedPolicy(ServedModel, DecisionEstimates, BasePolicy):
    name = "learned"

    def __init__(self, model_dir: str | Path | None = None, *, backend: str | None = None, fallback: str = "fgd",
                 fallback_kwargs: dict[str, Any] | None = None, refresh_every: int = 1, loaded: Any = None,
                 backend_kwargs: dict[str, Any] | None = None, lookahead: Lookahead | None = None,
                 window: int | None = None) -> None:  # fmt: skip
        """``loaded``: an :class:`inference.model.io.LoadedModel` to serve in-process instead of a directory;
        ``lookahead``: roll each decision's best candidates forward through T (:mod:`inference.lookahead`);
        ``window``: jobs per model call (module docstring; default ``$SEMSCHED_MODEL_WINDOW``, else 256; 0: all)."""
        self.model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        self.refresh_every = max(1, int(refresh_every))
        self.window = model_window(window)
        self.fallback_name = fallback
        self.fallback: Policy = get_policy(fallback, **dict(fallback_kwargs or {}))
        self._open(backend, backend_kwargs, loaded)  # (ServedModel)
        self.caches = StepCaches()  # embeddings, pair features, job rows and topologies, from step to step
        self._caller = StepCaller()  # the step's backend call (its pair features overlap a remote call)
        self.backoff = ServerBackoff()  # a remote server that keeps failing is left alone for a while
        self.lookahead = lookahead
        self._warn_if_not_looking_ahead()
        self.last_step = StepStatus(backend=self.backend.name if self.backend else "", fallback=self.fell_back,
                                    reason=self.fallback_reason or "")  # fmt: skip
        self._prepared: PreparedStep | StepStatus | None = None  # from prepare_step, for the next order()
        self._step: PreparedStep | None = None
        self._windows = StepWindows(size=self.window)  # the step's order and its model calls
        self._utilisation: np.ndarray | None = None  # prepare_step's, for the step it prepared
        self._budget: StepBudget | None = None  # prepare_step's, likewise: a remote backend's step deadline left
        self._step_fallback: str | None = None
        self._in_step = False
        self._calls = 0
        self.model_calls = 0  # backend calls (one per step)
        self.fallback_jobs: set[str] = set()  # jobs of the current step the fallback scored
        self.decision_notes: dict[str, str] = {}  # job id -> what the lookahead saw (for its decision record)
        self._fallback_gpus: set[str] = set()  # jobs of the step whose GPUs the fallback chose (forget tells it)

    def _warn_if_not_looking_ahead(self) -> None:
        """A lookahead on a model without ψ or T decides as plain ``learned`` (each record says so): say it
        once when the policy is built, not only in the records."""
        if self.lookahead is None or self.fell_back:
            return
        missing = heads_missing(self.loaded.model)
        if missing:
            log.warning("learned-lookahead: model %s has no %s; every decision is the plain learned "
                        "policy's", self.model_version, missing)  # fmt: skip

    def close(self) -> None:
        """Let go of the backend (a Triton client unregisters its shared-memory region from the server)
        and of the step's pair thread; the worker calls it when it stops."""
        if self.backend is not None:
            self.backend.close()
        self._caller.close()

    @property
    def windows(self) -> StepWindows:
        """The current (or last) step's order and model calls (:class:`inference.step_windows.StepWindows`)."""
        return self._windows

    def encoder(self) -> EncoderCache:
        return self.caches.encoder(self.spec.encoder)

    def pair_cache(self, snapshot: ClusterSnapshot) -> PairCache:
        """The step's pair features kept for ``snapshot``'s node table (:class:`StepCaches`)."""
        return self.caches.pair_cache(snapshot)

    # -- the step ----------------------------------------------------------------------------
    @property
    def wants_utilisation(self) -> bool:
        """Whether the serving model reads the nodes' hopping-window utilisation (the worker then passes it)."""
        return not self.fell_back and bool(self.spec.utilisation)

    async def prepare_step(self, snapshot: ClusterSnapshot, jobs: Sequence[JobRequest], now: float,
                           utilisation: np.ndarray | Callable[[], np.ndarray] | None = None, *,
                           window: int | None = None) -> StepStatus:  # fmt: skip
        """Call the backend for the coming step (awaited by the worker before ``schedule_step``) on the
        first ``window`` (default: the policy's) of ``jobs`` that fit somewhere (none fits: no call; a window
        of 0 takes every job, fitting or not), which come in the step's order
        (:func:`scheduling.orderings.compose.queue_order`); ``utilisation``: float ``[N]``, the nodes' window means, or what reads them — called only when
        the version this step runs (after the backend's refresh, here) reads them (:attr:`wants_utilisation`)."""

        self._retry()
        self._budget = self._utilisation = None  # (not a step's the worker prepared and then left unstarted: review)
        if self.fell_back:
            return self.last_step
        remote = hasattr(self.backend, "step_deadline_ms")  # a model server's (Triton): its calls wait on the network
        budget = getattr(self.backend, "step_deadline_ms", None)  # its bound on the whole step (None: none)
        if remote and (held := self.backoff.holding()) is not None:  # (inference/server_backoff.py)
            self._prepared = StepStatus(self.backend.name, self.model_version, True, held)
            return self._prepared
        self.backend.refresh()
        if callable(utilisation):
            utilisation = utilisation() if self.wants_utilisation else None
        self._utilisation = utilisation
        queue = jobs
        try:  # the texts the backend embeds, the inputs, the answer, the queue's texts after it (StepCaller)
            jobs = fitting_window(queue, 0, self.window if window is None else window, snapshot)
            if not jobs:  # nothing in the queue fits on any node: nothing will be scored, no call, but the
                self._prepared = None  # version the backend just looked up serves (the worker's /status reads it)
                self.last_step = StepStatus(self.backend.name, self.model_version)
                return self.last_step
            covered = {j.job_id for j in jobs}
            # the queue past the window, for a served encoder to embed ahead; not in-process: embedded here on
            # the event loop, with no deadline, a restart's backlog held the worker for its whole queue (review)
            ahead = self.encoder().serve_remotely and remote
            rest = [j for j in queue if j.job_id not in covered] if ahead else []
            started = time.monotonic()
            inputs, out = await self._caller.within(budget, self.backend, snapshot, jobs, rest, now, self.spec,
                                                    self.encoder(), knn=self.loaded.config.knn,
                                                    pair_cache=self.pair_cache(snapshot), job_rows=self.caches.job_rows,
                                                    utilisation=utilisation)  # fmt: skip
            self._prepared = PreparedStep.of(jobs, inputs, snapshot, out)
            if remote:  # what is left of it bounds the windows the step opens (inference/step_budget.py)
                self._budget = StepBudget(math.inf if budget is None else budget, (time.monotonic() - started) * 1000.0)
        except Exception as e:  # the backend's (BackendError) or building the inputs: the fallback decides
            self._prepared = StepStatus(self.backend.name, self.model_version, True, failure_reason(e))
            if remote and server_failed(e):
                self.backoff.failed(self._prepared.reason)
        else:
            self.backoff.answered()
        self.model_calls += 1
        return self._prepared if isinstance(self._prepared, StepStatus) else self._status(self._prepared)

    def _status(self, step: PreparedStep) -> StepStatus:
        return StepStatus(self.backend.name, step.version or self.model_version, False, "")

    def queue_order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        """The step's order (FIFO) without starting the step (:func:`scheduling.orderings.compose.queue_order`)."""
        return super().order(jobs, now, context)

    def order(self, jobs: Sequence[JobRequest], now: float, context: OrderContext | None = None) -> list[JobRequest]:
        ordered = self.queue_order(jobs, now, context)
        self.begin_step(ordered, now)
        return ordered

    def begin_step(self, ordered: list[JobRequest], now: float) -> None:
        """A step starts with these jobs in this order (from ``order``, or a composed ordering's)."""
        self.fallback_jobs, self.decision_notes, self._fallback_gpus = set(), {}, set()
        if self._prepared is None:
            self._retry()  # (the worker's prepare_step already looked)
        if self.fell_back:
            return
        prepared, self._prepared = self._prepared, None
        self._in_step, self._step, self._step_fallback = True, None, None
        self._windows = StepWindows(ordered, now, self.window, self._utilisation, self._budget)  # (warm_up keeps the old)
        self._utilisation = self._budget = None
        if self.lookahead is not None:
            self.lookahead.begin_step()
        if isinstance(prepared, StepStatus):
            self._step_fallback = prepared.reason
            self.last_step = prepared
        elif prepared is not None:
            self._step = prepared
            self._windows.cover(prepared)
            self.last_step = self._status(prepared)

    def _call(self, snapshot: ClusterSnapshot, jobs: Sequence[JobRequest], now: float, queue: np.ndarray | None,
              refresh: bool = True, utilisation: np.ndarray | None = None,
              budget: StepBudget | None = None) -> PreparedStep | None:  # fmt: skip
        """A synchronous backend call; None (and the step falls back) when the backend fails.
        ``refresh``: look for a new model version first (not within a step that already called:
        one version decides the whole step). ``budget``: a remote backend's step deadline, what is left
        of it bounds this call (:mod:`inference.step_budget`), the window's new texts embedded by the
        backend within it (not by a local MiniLM, loaded on the event loop)."""
        from inference.model.step import build_inputs

        if refresh:
            self.backend.refresh()
        until = budget.open_window() if budget is not None else None
        if budget is not None and until is None:
            return self._fall_back(budget.spent_reason(self.backend.name))
        self.model_calls += 1  # (counted as prepare_step counts: also a call whose inputs failed to build)
        started = budget.clock() if budget is not None else 0.0
        try:  # the backend's failure (BackendError) or building the inputs (a text the encoder refuses,
            # say): the fallback decides the rest of the step, as when prepare_step fails (a window's failure does
            # not count against the server: it may have had a sliver of the deadline; the next prepare_step's does)
            if budget is not None and until is not None and self.encoder().serve_remotely:
                embed_texts_now(self.backend, self.encoder(), [j.text for j in jobs], lambda: budget.ms_until(until))
            inputs = build_inputs(snapshot, jobs, now, self.spec, self.encoder(), knn=self.loaded.config.knn,
                                  queue=queue, pair_cache=self.pair_cache(snapshot), job_rows=self.caches.job_rows,
                                  utilisation=utilisation if self.spec.utilisation else None)  # fmt: skip
            if budget is None or until is None:
                out = self.backend.policy(inputs)
            elif (left := budget.ms_until(until)) < MIN_CALL_MS:  # the texts and the inputs took what was left
                return self._fall_back(budget.spent_reason(self.backend.name))
            else:
                out = self.backend.policy(inputs, deadline_ms=left)
            step = PreparedStep.of(jobs, inputs, snapshot, out)
        except Exception as e:
            return self._fall_back(failure_reason(e))
        finally:
            if budget is not None:
                budget.charge(started)
        self.last_step = self._status(step)
        return step

    def _fall_back(self, reason: str) -> None:
        """The fallback decides the rest of the step, for ``reason`` (its records say so)."""
        self._step_fallback = reason
        self.last_step = StepStatus(self.backend.name, self.model_version, True, reason)

    def _step_for(self, job: JobRequest, snapshot: ClusterSnapshot) -> PreparedStep | None:
        step = self._step
        if self._in_step:
            w = self._windows
            step = w.covering.get(job.job_id)  # a call of this step (re-scoring brings it up to date)
            if step is None or step.table is not snapshot.table:  # the next window opens at this job
                step = self._step = self._call(snapshot, w.opening_at(job, snapshot), w.now, None, refresh=not w.calls,
                                               utilisation=w.utilisation, budget=w.budget)  # fmt: skip
                if step is not None:
                    w.cover(step)
            return step
        # no order(): one long-lived snapshot scored job by job (the fill benchmark)
        if step is None or step.table is not snapshot.table or self._calls >= self.refresh_every:
            zeros = np.zeros(self.spec.job_dim, np.float32)
            step = self._step = self._call(snapshot, [job], job.submit_time, zeros)
            self._calls = 0
        self._calls += 1
        return step

    def _leave_step(self) -> None:
        """Scoring goes on outside a step (the fill path after a simulated step): nothing of the step's
        (its time, its queue summary, its calls, its fallback) decides for jobs outside its order."""
        self._in_step, self._step, self._step_fallback = False, None, None
        self._windows = StepWindows(size=self.window)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        if self._in_step and job.job_id not in self._windows.position:
            self._leave_step()  # (found by review: the step's flag stayed up, and one-off jobs were scored as its)
        if self._in_step:
            self._windows.scored.add(job.job_id)
        else:  # a failed call outside a step covers that call only (found by review: one failure handed the rest
            self._step_fallback = None  # of a fill run to the fallback, reported under the learned policy's name)
        if not (self.fell_back or self._step_fallback is not None):
            step = self._step_for(job, snapshot)
            if step is not None:  # else the backend failed just now
                try:
                    scores = self._row(step, job, snapshot, feasible_mask)
                except Exception as e:  # e.g. a served version the local head cannot follow: rest of the step
                    self._step_fallback = f"in-step re-scoring failed: {type(e).__name__}: {e}"
                    self.last_step = StepStatus(self.backend.name, step.version, True, self._step_fallback)
                else:
                    scores[~feasible_mask] = -np.inf
                    if self._in_step:  # (outside a step it is self._step: found by review, a fill run kept every
                        self._windows.scored_by[job.job_id] = step  # pod's call, ~0.6 MB each at 1,213 nodes)
                    return self._look_ahead(step, job, snapshot, scores) if self.lookahead is not None else scores
        self.fallback_jobs.add(job.job_id)  # decided by the heuristic (the worker's records say so per job)
        return self.fallback.score(job, snapshot, feasible_mask)

    def _row(self, step: PreparedStep, job: JobRequest, snapshot: ClusterSnapshot, feasible: np.ndarray) -> np.ndarray:
        """float64 ``[N]``: the step's scores of ``job``, re-scored where its inputs moved
        (:mod:`inference.rescoring`)."""
        i = step.index.get(job.job_id)
        if i is None:  # scored on this step's embeddings, all nodes on the current state
            job_row = job_demand([job], self._windows.now if self._in_step else job.submit_time, self.spec,
                                 self.encoder())[0]  # fmt: skip
            unscored = np.full(snapshot.num_nodes, -np.inf)  # (not 0: a skipped re-scoring must not read as scores)
            return self._rescore(step, job, job_row, snapshot, feasible.copy(), unscored)
        nodes, pairs = moved_nodes(step, i, job, snapshot, self.spec, feasible, self.pair_cache(snapshot))
        return self._rescore(step, job, step.jobs[i], snapshot, nodes, step.scores[i].astype(np.float64), pairs)

    def _rescore(self, step: PreparedStep, job: JobRequest, job_row: np.ndarray, snapshot: ClusterSnapshot,
                 nodes: np.ndarray, scores: np.ndarray, pairs: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
        """:func:`inference.rescoring.rescore` with the model version the step's call used."""
        if nodes.any() and step.version and step.version != self.model_version:
            self.backend.refresh(force=True)  # the server answered with a version we do not hold yet
            if step.version != self.model_version:
                if np.isneginf(scores[nodes]).any():  # nodes the model did not score: the rest of the step falls back
                    raise RuntimeError(f"local model {self.model_version} != {step.version} cannot score nodes "
                                       "the step's call did not")  # fmt: skip
                note = f"in-step re-scoring skipped: local model {self.model_version} != {step.version}"
                self.last_step.reason = self.decision_notes[job.job_id] = note  # (its record says so)
                return scores
        return rescore(self.loaded.model, step, job, job_row, snapshot, self.spec, nodes, scores, pairs)

    def _look_ahead(self, step: PreparedStep, job: JobRequest, snapshot: ClusterSnapshot,
                    scores: np.ndarray) -> np.ndarray:  # fmt: skip
        """``scores`` adjusted by the lookahead (:meth:`Lookahead.in_step`) over the jobs of the step's
        order after ``job`` not yet scored in this step. Unchanged outside a step and while this
        worker does not hold the version a server answered with."""
        if self.lookahead is None or not self._in_step or job.job_id not in self._windows.position:
            return scores
        if step.version and step.version != self.model_version:  # (the rollouts need the version that answered)
            self._note(job.job_id, f"lookahead skipped: local model {self.model_version} != {step.version}; "
                                   "the plain scores decide")  # fmt: skip
            return scores
        w = self._windows
        later = w.later(job)  # lazy: in_step takes `depth`
        if w.budget is not None and self.encoder().serve_remotely:  # a server embeds the texts: the rollouts take
            # the jobs whose text it embedded, never one a local MiniLM would embed on the event loop (review)
            later = (j for j in later if j.job_id in w.covering or not self.encoder().missing([j.text]))
        out, note = self.lookahead.in_step(self.loaded.model, step, job, scores, snapshot, later, self.spec, self.caches,
                                           row_of=self._job_row)  # fmt: skip
        if note:
            self._note(job.job_id, note)
        return out

    def _note(self, job_id: str, note: str) -> None:
        """Add ``note`` to the job's decision record (after what in-step re-scoring noted for it)."""
        before = self.decision_notes.get(job_id)
        self.decision_notes[job_id] = f"{before}; {note}" if before else note

    def _job_row(self, job: JobRequest) -> np.ndarray:
        """A pending job's feature row in this step (from the step's call that covers it, else computed:
        the same row, a job's row depends on it and the step's time alone)."""
        row = self._windows.covered_row(job)
        return row if row is not None else job_demand([job], self._windows.now, self.spec, self.encoder())[0]

    def score_all(self, jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, now: float = 0.0) -> np.ndarray:
        """float32 ``[J, N]``: one model call for ``jobs`` on ``snapshot`` as it is (not masked by the
        filters; ``-inf`` where a job's shape does not fit by resources), the way the worker calls
        the backend once per step."""
        step = self._call(snapshot, jobs, now, None)
        if step is None:
            raise RuntimeError(self.last_step.reason)
        return step.scores

    def forget(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> None:
        """A placement of this step was rolled back (a gang that did not fit whole): capacity came back, so
        a job shape that fit nowhere may fit again (:mod:`scheduling.filters.fits_somewhere`)."""
        self._windows.fits = FitsSomewhere()
        if self.lookahead is not None:
            self.lookahead.capacity_returned()
        if job.job_id in self._fallback_gpus and hasattr(self.fallback, "forget"):  # what it recorded goes too
            self._fallback_gpus.discard(job.job_id)
            self.fallback.forget(snapshot, node_index, job)  # type: ignore[union-attr]

    async def warm_up(self, snapshot: ClusterSnapshot | None = None) -> float:
        """A made-up step before the worker's first real one, leaving no step state behind
        (:func:`inference.warm_up.warm_up_policy`). Seconds; 0 without a model."""
        from inference.warm_up import warm_up_policy

        return 0.0 if self.fell_back else await warm_up_policy(self, snapshot)

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        if (self.fell_back or self._step_fallback is not None) and hasattr(self.fallback, "select_gpus"):
            self._fallback_gpus.add(job.job_id)
            return self.fallback.select_gpus(snapshot, node_index, job)  # type: ignore[union-attr]
        return best_fit_gpus(snapshot, node_index, job)

    def __repr__(self) -> str:
        what = f"fallback {self.fallback_name}: {self.fallback_reason}" if self.fell_back else self.model_version
        return f"<policy learned ({what})>"
