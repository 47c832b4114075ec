"""Training data from the ClickHouse archive: the cluster state at every archived placement.

The archive holds what the live system did — submissions (``jobs_submitted``), the node
inventory (``nodes_telemetry``), every decision (``decisions``: node, GPUs and the
resources the worker reserved) and what became of it (``jobs_lifecycle``). Replaying those
events in time order rebuilds, for each placed decision, the state the policy saw:

- one :class:`~scheduling.snapshot.ClusterSnapshot` per cluster from the nodes' latest
  telemetry (capacity, GPU model, topology; every node healthy, empty at the start);
- a placement reserves the decision's resources on its node and GPUs (``gpu_indices``);
- the end of that attempt (``finished``, ``failed``, ``preempted``, ``timed_out``; or a
  ``rejected`` while it is still held; the first end in the topic, as the worker applies it,
  :mod:`inference.training.archive_events`) releases them: before the first decision of the end's
  partition whose step had handled it (``decisions.lifecycle_through``, the state the step saw:
  under load the worker handles a report seconds after its agent sent it), or at the end's event
  time where the next decision does not say (archived before that column) or is on another
  partition (the topics were repartitioned); at one millisecond, releases of earlier placements
  come before new placements, and a placement's own end after it;
- the pending queue: a job is pending from its submission (or the end of an attempt that failed,
  was preempted or timed out: the worker queues it again, or gives it up with a rejection) until
  its placement, at their event times (submissions lag under load as
  reports do: the queue is not the worker's as exactly as what placements hold); the queue summary of a
  decision is the mean demand of the jobs of the model call that covered it, as
  :class:`~inference.training.collect.RecordingPolicy` records it (:mod:`inference.training.queue_windows`:
  the first jobs pending when its scheduling step, ``step_id``, began that fit on some node, in FIFO
  order, the learned policy's; a composed ordering's, or jobs the DAG gate held back, are not
  modelled: the worker's step order is not archived). Decisions of one step
  are replayed in their Kafka order (they may share a millisecond);
- the job tokens: every demonstration carries the feature rows of the jobs of that call
  (``Demonstrations.tokens``: its own job first, then at most ``max_tokens`` − 1 others, a
  seeded sample when more were pending), the tokens the worker's model call saw; a model with
  job tokens (``ModelConfig.job_tokens``) trains on these real queues instead of the stand-in
  the fill sequences need (:func:`inference.training.imitation.token_windows`).

A decision becomes a demonstration when its OUTCOME is kept (default: the attempt
``finished`` — placements that ended in failure, preemption or a timeout are not imitated),
its chosen node is feasible in the rebuilt state and at least ``min_feasible`` nodes were
(one feasible node teaches nothing), and as many as the worker recorded (``decisions.feasible_nodes``;
the rebuilt inventory is each node's latest report from the start: where the worker had another,
a node not reported yet or unhealthy then, the decision is skipped with that reason). The target is the chosen node (optionally with the
archived top candidates, ``decisions.candidates``, that scored as high: ``tied_targets``). Features are those
of :class:`~inference.training.collect.RecordingPolicy` (node state, pair features on the
current free capacity, job demand at the decision time, queue summary), so
:func:`~inference.training.imitation.train_imitation` trains on them unchanged.

The events are the archive's (``storage.queries.training_events``, folded by
:func:`inference.training.archive_events.fold_events`): ``ops`` reads them, this module
holds no SQL.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.encoders import EncoderCache, get_encoder
from inference.features.cluster import frag_pair_features
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from inference.features.spec import FeatureSpec
from inference.step_windows import model_window
from inference.training.archive_events import ArchiveEvents, Placed
from inference.training.collect import Demonstrations, label_spec
from inference.training.queue_windows import QueueWindows
from scheduling.events import decided_by as decided_by_policy
from scheduling.events import step_tick
from scheduling.filters.framework import run_filters
from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import Workload
from scheduling.policies.base import fifo_key
from scheduling.snapshot import ClusterSnapshot

RELEASING = ("finished", "failed", "preempted", "timed_out", "rejected")


@dataclass(frozen=True)
class _Hold:
    """What a placement holds (the decision's reservation), as :meth:`ClusterSnapshot.reserve` wants it."""

    job_id: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    per_gpu_milli: int
    app: str | None


@dataclass
class ArchiveDemonstrations:
    """The demonstrations and an account of every placed decision that did not become one."""

    demos: Demonstrations
    decision_ids: list[str] = field(default_factory=list)  # one per demonstration
    times: list[float] = field(default_factory=list)  # decision time (epoch s) per demonstration
    placed: int = 0  # placed decisions in the archive
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> decisions
    policies: Counter[str] = field(default_factory=Counter)  # policy of the kept decisions

    def summary(self) -> dict[str, Any]:
        return {"placed_decisions": self.placed, "demonstrations": len(self.demos), "skipped": dict(self.skipped),
                "policies": dict(self.policies)}  # fmt: skip

    def state_warning(self) -> str | None:
        """A sentence when more sampled decisions were dropped because the rebuilt state was not the
        worker's than were kept (nodes that joined, left or changed: the inventory is each node's latest
        report), else None. Found by review: the counts were only in the printed summary."""
        lost = {r: n for r, n in self.skipped.items() if r in STATE_REASONS and n}
        if sum(lost.values()) <= len(self.demos):
            return None
        why = ", ".join(f"{n} {r}" for r, n in sorted(lost.items(), key=lambda kv: -kv[1]))
        return (f"{sum(lost.values())} decisions were dropped because the rebuilt cluster state was not the worker's "
                f"({why}), more than the {len(self.demos)} kept: nodes that joined, left or changed during the "
                "archive's period (the replay takes each node's latest report from the start)")  # fmt: skip


#: the skip reasons that say the rebuilt state differs from the worker's (ArchiveDemonstrations.state_warning)
STATE_REASONS = ("node not in the inventory", "GPUs the node no longer has", "chosen node infeasible in the rebuilt state",
                 "rebuilt state not the worker's (feasible nodes)")  # fmt: skip


def archive_spec(events: ArchiveEvents, text_dim: int = 32, *, cluster: bool = True, frag: bool = True,
                 encoder: str = "hashed", before: float | None = None) -> FeatureSpec:  # fmt: skip
    """A feature spec for the archive's clusters: their GPU models, the text ``encoder`` (``hashed``:
    ``text_dim``-wide n-grams; ``minilm``: all-MiniLM-L6-v2, 384-d, ``text_dim`` unused), and, as
    ``semsched train`` builds its own (``--cluster-features``, ``--frag-features``), the cluster-level
    columns and FGD's fragmentation columns over the workload of the archive's submissions (FGD's
    target workload is the pods the cluster sees) — those submitted ``before`` a time, if given (a
    validation cut: the later ones are the validation period's)."""
    text = get_encoder(encoder, text_dim)
    models = sorted({n.gpu_model for nodes in events.nodes.values() for n in nodes if n.gpu_model})
    jobs = [j for j in events.jobs.values() if before is None or j.submit_time < before]
    workload = FeatureSpec.workload_rows(Workload.from_jobs(jobs)) if frag and jobs else ()
    return FeatureSpec(gpu_models=tuple(models), encoder=text.name, text_dim=text.dim, cluster=cluster,
                       workload=workload)  # fmt: skip


def _sample_rank(seed: int, key: tuple[str, str]) -> int:
    """A decision's place in the seeded sample order: a hash of the seed, its cluster and its id."""
    digest = hashlib.blake2b(f"{seed}|{key[0]}|{key[1]}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _timeline(events: ArchiveEvents) -> list[tuple[float, int, str, Any]]:
    """(time, order, kind, payload) sorted: submissions, releases of earlier placements,
    placements, then releases of a placement at its own millisecond."""
    out: list[tuple[float, int, str, Any]] = []
    first_placed: dict[tuple[str, str], float] = {}
    for p in events.placed:
        key = (p.cluster, p.job_id)
        first_placed[key] = min(p.time, first_placed.get(key, p.time))
    for key, job in events.jobs.items():  # a submission stamped by a clock ahead of the worker's (it accepts
        # up to its skew) came before the job's placement all the same: at it at the latest (found by
        # review: sorted after it, the job stayed pending for ever in every later step's queue)
        out.append((min(job.submit_time, first_placed.get(key, job.submit_time)), 0, "submit", job))
    for p in events.placed:
        out.append((p.time, 2, "place", p))
        if p.end_time is not None:
            t = max(p.end_time, p.time)
            # the worker queues the job again after every such end (streams/state.py), or gives it up with a
            # rejection at the same time, which the timeline applies after this (found by review: only an attempt
            # whose retry was placed came back, so a retry still pending was missing from the later queues)
            requeue = p.end_state in ("failed", "preempted", "timed_out")
            out.append((t, 1 if t > p.time else 3, "release", (p, requeue)))
    for (cluster, job_id), t in events.rejected.items():
        out.append((t, 1, "reject", (cluster, job_id)))
    out.sort(key=lambda e: (e[0], e[1]))
    return out


def outcome(p: Placed, cut: float | None = None) -> str:
    """How ``p``'s attempt ended (``running``: not yet), as known at ``cut`` for a decision before it
    (an end at or after the cut was not known then), as known now otherwise."""
    if cut is not None and p.time < cut and (p.end_time is None or p.end_time >= cut):
        return "running"
    return p.end_state or "running"


def decided_by(p: Placed) -> str:
    """Who chose ``p``'s node: its policy, or its fallback heuristic (``<policy> (fallback)``, as the
    archive's metrics group it: ``storage.queries._common.DECIDED_BY``) when the model did not answer
    (found by review: the fallback's placements were imitated and counted as the learned policy's)."""
    return decided_by_policy(p.policy, p.fallback)


def eligible(events: ArchiveEvents, outcomes: Iterable[str], policies: Iterable[str] | None,
             cut: float | None = None, since: float | None = None) -> tuple[list[Placed], Counter[str]]:  # fmt: skip
    """The placed decisions whose outcome (:func:`outcome`, at ``cut``) and policy are kept, from ``since``
    on (an earlier one only holds its node in the rebuilt state), and a count of the others by reason."""
    keep_outcomes, keep_policies = set(outcomes), None if policies is None else set(policies)
    kept, skipped = [], Counter[str]()
    for p in events.placed:
        if since is not None and p.time < since:
            skipped["before the window (--since)"] += 1
        elif (state := outcome(p, cut)) not in keep_outcomes:
            skipped[f"outcome {state}"] += 1
        elif keep_policies is not None and decided_by(p) not in keep_policies:
            skipped[f"policy {decided_by(p)}"] += 1
        elif p.started_node and p.node_id and p.started_node != p.node_id:  # (archives before migration 0017 kept
            skipped["started on another node than decided"] += 1  # a re-decided record that never ran; review)
        else:
            kept.append(p)
    return kept, skipped


def reconstruct(events: ArchiveEvents, *, spec: FeatureSpec | None = None, outcomes: Iterable[str] = ("finished",),
                policies: Iterable[str] | None = None, min_feasible: int = 2, max_samples: int | None = None,
                seed: int = 0, tied_targets: bool = False, max_tokens: int = 64, cut: float | None = None,
                since: float | None = None, window: int | None = None) -> ArchiveDemonstrations:  # fmt: skip
    """Demonstrations from the archive (module docstring). ``outcomes``: the attempt end
    states to learn from (``running`` = no end yet); ``policies``: only decisions of these
    policies (None = all; a fallback's placements are ``<policy> (fallback)``'s, :func:`decided_by`); ``cut``: a validation cut — a decision before it is judged by what was
    known of its attempt at the cut (its outcome, ψ's run-time label), not by what came later (found
    by review: the training half learned from ends in the validation period); ``max_samples``: a
    seeded sample of the eligible decisions;
    ``tied_targets``: the target set also holds the archived top candidates that scored as
    high as the chosen node (heuristics like FGD tie often). Off by default: measured on a
    3,000-job fgd demo archive, imitating the worker's actual pick (its tie-break, the lowest
    node index, packs) reached 93.6 % on the held-out fill replay, the tied sets 89.2 %.
    ``max_tokens``: job tokens kept per demonstration (module docstring); ``since``: only decisions from
    then on are demonstrations (the events read for a window, ``storage.queries.training_events``, also
    hold the earlier placements still running at its start, which the replay needs for the state);
    ``window``: jobs per model call, as the worker's ``SEMSCHED_MODEL_WINDOW`` (default: this process's)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1 (the job itself), not {max_tokens}")
    spec = spec or archive_spec(events, before=cut)
    labels = label_spec(spec, (j for j in events.jobs.values() if cut is None or j.submit_time < cut))
    encoder = EncoderCache(get_encoder(spec.encoder))
    result = ArchiveDemonstrations(Demonstrations(), placed=len(events.placed))
    kept, result.skipped = eligible(events, outcomes, policies, cut, since)
    ids = [(p.cluster, p.decision_id) for p in kept]  # (cluster, decision id): an id is unique only within a cluster
    if max_samples is not None and len(ids) > max_samples:  # the ids of least hash: an archive that grew keeps
        # its earlier sample but for the new ids that displace some (found by review: a draw over the ids in
        # time order changed the whole sample with one new row)
        chosen = set(sorted(ids, key=lambda key: _sample_rank(seed, key))[:max_samples])
        result.skipped["not sampled"] += len(ids) - len(chosen)
    else:
        chosen = set(ids)

    snaps = {c: ClusterSnapshot.from_nodes(nodes) for c, nodes in events.nodes.items()}
    index = {c: {nid: i for i, nid in enumerate(s.node_ids)} for c, s in snaps.items()}
    group: dict[str, int] = {}
    pending: dict[tuple[str, str], JobRequest] = {}
    held: set[tuple[str, str]] = set()  # (cluster, decision id)
    steps: dict[str, tuple[str, QueueWindows]] = {}  # cluster -> its current step and the step's model calls
    window_size = model_window(window)  # (inference/training/queue_windows.py)
    rng = np.random.default_rng(seed)
    # clusters whose decisions say which lifecycle reports their step had handled (module docstring)
    watermarked = {p.cluster for p in events.placed if p.lifecycle_through is not None}
    due: dict[tuple[str, int], list[tuple[int, str, Placed]]] = {}  # (cluster, partition) -> heap of held placements
    replay = {c for (c, _), j in events.jobs.items() if j.trace_duration_s is not None}  # ψ's run-time labels
    timeline = _timeline(events)
    by_time = _freed_by_time(timeline)
    split = split_times(events)
    placed_attempt: dict[tuple[str, str], int] = {}  # the latest attempt of each job placed so far
    for n, (t, _, kind, what) in enumerate(timeline):
        if kind == "submit":
            pending[(what.cluster, what.job_id)] = what
        elif kind == "reject":
            pending.pop(what, None)
        elif kind == "release":
            p, requeue = what
            if (p.cluster, p.decision_id) in held and by_time[n]:
                held.discard((p.cluster, p.decision_id))
                snaps[p.cluster].free(index[p.cluster][p.node_id], _hold(p, events), p.gpu_indices, check=False)
            if requeue and (p.cluster, p.job_id) in events.jobs and placed_attempt.get((p.cluster, p.job_id), -1) <= p.attempt:
                # (an end stamped by an agent's clock ahead of the worker's can sort after the retry's placement)
                pending[(p.cluster, p.job_id)] = events.jobs[(p.cluster, p.job_id)]
        else:
            d: Placed = what
            for p in _handled_ends(d, t, due):
                if (p.cluster, p.decision_id) in held:
                    held.discard((p.cluster, p.decision_id))
                    snaps[p.cluster].free(index[p.cluster][p.node_id or ""], _hold(p, events), p.gpu_indices,
                                          check=False)  # fmt: skip
            snap = snaps.get(d.cluster)
            i = index.get(d.cluster, {}).get(d.node_id or "")
            if snap is None or i is None:
                result.skipped["node not in the inventory"] += int((d.cluster, d.decision_id) in chosen)
                pending.pop((d.cluster, d.job_id), None)
                continue
            if d.gpu_indices and max(d.gpu_indices) >= int(snap.num_gpu[i]):  # the inventory is the latest report
                result.skipped["GPUs the node no longer has"] += int((d.cluster, d.decision_id) in chosen)
                pending.pop((d.cluster, d.job_id), None)
                continue
            began = step_time(d.step_id, t)  # the step's clock, as the worker's features read it
            step = steps.get(d.cluster)
            if step is None or step[0] != d.step_id or not d.step_id:  # the step's model calls, over the jobs pending
                # when it began in the worker's order (FIFO: a retried job keeps its submission time; found by
                # review: in the order they came back to the queue); only the cluster's current step is kept
                pending_then = sorted((j for (c, _), j in pending.items() if c == d.cluster), key=fifo_key)
                step = steps[d.cluster] = (d.step_id, QueueWindows(
                    pending_then, lambda js, t=began: job_demand(js, t, spec, encoder), lambda s: node_state(s, spec),
                    size=window_size))  # fmt: skip
            job = events.jobs.get((d.cluster, d.job_id))
            window = step[1].window(job, snap) if job is not None else None  # (every decision: the windows open
            # as the step's placements left the cluster)
            if (d.cluster, d.decision_id) in chosen:
                tokens = _StepJobs(window.index, window.rows).tokens(d.job_id, max_tokens, rng) if window else None
                _sample(result, d, began, snap, i, events, window.summary if window else None, spec, encoder, min_feasible,
                        group, d.cluster in replay, tied_targets, tokens,
                        known=outcome(d, cut) == (d.end_state or "running"), labels=labels,
                        nodes=window.nodes if window else None,
                        split_time=split.get((d.cluster, d.decision_id)))  # fmt: skip
            pending.pop((d.cluster, d.job_id), None)
            placed_attempt[(d.cluster, d.job_id)] = max(d.attempt, placed_attempt.get((d.cluster, d.job_id), -1))
            snap.reserve(i, _hold(d, events), d.gpu_indices, check=False)
            held.add((d.cluster, d.decision_id))
            if d.cluster in watermarked and d.end_position is not None:
                partition, offset = d.end_position
                heapq.heappush(due.setdefault((d.cluster, partition), []), (offset, d.decision_id, d))
    return result


def split_times(events: ArchiveEvents) -> dict[tuple[str, str], float]:
    """Each placed decision's time for the validation split, by (cluster, decision id): its step's first
    decision's (found by review: the worker stamps a step's records one by one, milliseconds apart, and a cut
    between them put decisions made on one state on both sides)."""
    first: dict[tuple[str, str], float] = {}
    for p in events.placed:
        if p.step_id:
            key = (p.cluster, p.step_id)
            first[key] = min(first.get(key, p.time), p.time)
    return {(p.cluster, p.decision_id): first[(p.cluster, p.step_id)] if p.step_id else p.time for p in events.placed}


def step_time(step_id: str, t: float) -> float:
    """When the step of ``step_id`` began (epoch s): the worker computes a job's features at its step's
    tick (its time waited, say), which the step's id carries (:func:`scheduling.events.step_tick`); ``t``
    (the decision's event time, stamped after the model call) for any other name. Found by review: the
    replay computed them at ``t``, the step's latency later (a job submitted 0.5 s before a 1 s step: log
    time waited 0.041 served, 0.092 trained)."""
    tick = step_tick(step_id)
    return tick if tick is not None and 0 < t - tick < 86_400 else t  # (a name that only looks like one)


def _handled_ends(d: Placed, t: float, due: dict[tuple[str, int], list[tuple[int, str, Placed]]]) -> list[Placed]:
    """The placements whose end the step of ``d`` (at ``t``) had handled, taken from ``due``: heaps of
    held placements by their end's offset, per (cluster, partition). Those of its own partition below its
    ``lifecycle_through`` (offsets of one partition only grow), and, the topics having been repartitioned,
    those left on another partition whose end's event time has come."""
    if d.lifecycle_through is None:
        return []
    heap = due.get((d.cluster, d.partition), [])
    out = []
    while heap and heap[0][0] < d.lifecycle_through:
        out.append(heapq.heappop(heap)[2])
    for (cluster, partition), other in due.items():
        if cluster == d.cluster and partition != d.partition:
            out += [e[2] for e in other if (e[2].end_time or t) <= t]
            other[:] = [e for e in other if (e[2].end_time or t) > t]
            heapq.heapify(other)
    return out


def _freed_by_time(timeline: list[tuple[float, int, str, Any]]) -> list[bool]:
    """Per event of ``timeline``: for a release, whether it frees at its event time, because the next
    placement of its cluster does not say which of the end's partition's reports its step had handled
    (it has no ``lifecycle_through``: archived before the column; or it is on another partition: the
    topics were given more partitions); else that placement's ``lifecycle_through`` decides."""
    out = [False] * len(timeline)
    says: dict[str, int | None] = {}  # cluster -> the partition its next placement's watermark is of
    for n in range(len(timeline) - 1, -1, -1):
        _, _, kind, what = timeline[n]
        if kind == "place":
            says[what.cluster] = what.partition if what.lifecycle_through is not None else None
        elif kind == "release":
            p = what[0]
            out[n] = p.end_position is None or says.get(p.cluster) != p.end_position[0]
    return out


@dataclass(frozen=True)
class _StepJobs:
    """The jobs of a model call's window: their ids' rows in ``rows`` (``job_demand`` at the step's start)."""

    index: dict[str, int]
    rows: np.ndarray  # float32 [P, job_dim]

    def tokens(self, job_id: str, most: int, rng: np.random.Generator) -> np.ndarray | None:
        """Rows of the window's other jobs, at most ``most`` − 1 (a sample from ``rng`` when it holds
        more, kept in its order); None when ``job_id`` is not in the window."""
        own = self.index.get(job_id)
        if own is None:
            return None
        others = np.delete(np.arange(len(self.rows)), own)
        if len(others) > most - 1:
            others = np.sort(rng.choice(others, most - 1, replace=False))
        return self.rows[others]


def _run_time(p: Placed, job: JobRequest, replay: bool) -> float:
    """ψ's run-time label, NaN where unknown (no loss). In a replayed cluster (its submissions carry the
    trace's run times) the job's recorded run time, as the fill sequences' label: the agents ran it
    sped up, so what the archive measured is not in the trace's seconds. Otherwise the archived outcome:
    how long the attempt ran, from its ``started`` to its ``finished`` (both on its agent's clock)."""
    if replay:
        return float("nan") if job.trace_duration_s is None else float(job.trace_duration_s)
    if p.end_state == "finished" and p.end_time is not None and p.started_time is not None:
        return max(p.end_time - p.started_time, 0.0)
    return float("nan")


def _hold(p: Placed, events: ArchiveEvents) -> _Hold:
    job = events.jobs.get((p.cluster, p.job_id))
    return _Hold(p.job_id, p.cpu_milli, p.memory_mib, len(p.gpu_indices), p.gpu_milli_per_gpu,
                 job.app if job else None)  # fmt: skip


def _sample(result: ArchiveDemonstrations, p: Placed, t: float, snap: ClusterSnapshot, i: int,
            events: ArchiveEvents, queue: np.ndarray | None, spec: FeatureSpec, encoder: Any,
            min_feasible: int, group: dict[str, int], replay: bool, tied: bool,
            others: np.ndarray | None, known: bool = True, labels: FeatureSpec | None = None,
            nodes: np.ndarray | None = None, split_time: float | None = None) -> None:  # fmt: skip
    labels = labels or spec  # (ψ's fragmentation label's workload: collect.label_spec)
    job = events.jobs.get((p.cluster, p.job_id))
    if job is None:
        result.skipped["no submission archived"] += 1
        return
    feasible = run_filters(job, snap, explain=False).feasible_mask
    if not feasible[i]:
        result.skipped["chosen node infeasible in the rebuilt state"] += 1
        return
    if p.feasible_nodes and int(feasible.sum()) != p.feasible_nodes:  # (found by review: the rebuilt inventory is
        # every node's latest report from the start, healthy; where the worker saw another state, a node not
        # reported yet or one unhealthy then, the demonstration taught a choice among nodes it did not have)
        result.skipped["rebuilt state not the worker's (feasible nodes)"] += 1
        return
    if int(feasible.sum()) < min_feasible:
        result.skipped[f"fewer than {min_feasible} feasible nodes"] += 1
        return
    target = np.zeros(snap.num_nodes, dtype=bool)
    target[i] = True
    chosen = dict(p.candidates).get(p.node_id or "")
    if tied and chosen is not None:  # archived candidates that scored as high as the chosen node: equally right
        for nid, score in p.candidates:
            k = snap.table.index.get(nid)
            if k is not None and feasible[k] and score >= chosen:
                target[k] = True
    if min_feasible > 1 and target.sum() == feasible.sum():
        result.skipped["every feasible node tied"] += 1
        return
    d = result.demos
    own = job_demand([job], t, spec, encoder)[0]
    now_state = node_state(snap, spec) if nodes is None else None
    d.nodes.append(now_state if nodes is None else nodes)  # (the model call's: queue_windows)
    d.pairs.append(pair_features(job, snap, spec))
    d.jobs.append(own)
    d.queues.append(own if queue is None else queue)
    d.tokens.append(own[None] if others is None else np.concatenate([own[None], others]))
    d.feasible.append(feasible.copy())
    d.target.append(target)
    # the auxiliary heads' labels, as RecordingPolicy records them from an expert: the node picked, the
    # fragmentation each placement adds (ψ), the run time (ψ), the picked node's row after it (T)
    d.choice.append(i)
    d.cost.append(frag_pair_features(job, snap, labels)[:, 0] if labels.workload else np.zeros(snap.num_nodes, np.float32))
    d.run_time.append(_run_time(p, job, replay) if known or replay else float("nan"))  # (an end after the cut: unknown)
    after = snap.copy()
    after.reserve(i, _hold(p, events), p.gpu_indices, check=False)
    d.next_row.append(node_state(after, spec)[i])
    d.prev_row.append((now_state if now_state is not None else node_state(snap, spec))[i])  # (T's target: next_states)
    d.source.append(f"archive {decided_by(p)} {p.decision_id}")
    if p.cluster not in group:
        group[p.cluster] = len(d.snapshots)
        d.snapshots.append(snap.copy())
    d.group.append(group[p.cluster])
    result.decision_ids.append(p.decision_id)
    result.times.append(p.time if split_time is None else split_time)  # (its step's: the validation cut is on these)
    result.policies[decided_by(p)] += 1
