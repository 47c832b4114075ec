"""``fgd``: Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", USENIX ATC 2023).

For each feasible node, and for a GPU-sharing pod each GPU of the node that holds it, FGD
computes the node's fragmentation ``F_n(M)`` (:mod:`scheduling.metrics.fragmentation`)
before and after the hypothetical placement and prefers the placement that increases it
least. As in the authors' simulator (``FGDScore``):

- score = ``sigmoid((F_before − F_after) / 1000) × 100``, truncated to an integer
  (``quantize=True``, the default; equal scores then go to the node priority — the fill
  benchmark's seeded node order); ``quantize=False`` keeps the continuous value. The
  truncation matters: it makes placements whose fragmentation differs by less than ~40
  milli-GPU tie, and the node priority then packs them onto the same nodes; on the openb
  fill benchmark the continuous variant allocates 92.1 % at 100 % arrived demand (seeds
  42–44) against 95.2 % quantised;
- a sharing pod (one GPU, < 1000 milli) is tried on every GPU with room; the node's score
  is its best GPU's, and :meth:`select_gpus` takes that GPU (ties → lowest index);
- a whole-GPU pod takes the lowest-index fully free GPUs, a CPU-only pod only changes the
  node's free cpu (which changes which workload types it can host).

**Target workload.** ``workload=`` a :class:`~scheduling.metrics.fragmentation.Workload`
or the pod list to estimate it from (the authors pass the trace's pod list). Without one,
FGD estimates it from the distinct pods it has been asked to score so far (the same
estimator, refreshed as they arrive: every pod for the first 16, then every ~6 %), so it
is deterministic for a given submission order.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence

import numpy as np

from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import FragTables, PodType, Workload, request_cpu
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.resources import FULL_GPU_MILLI
from scheduling.snapshot import ClusterSnapshot

#: the job ids the workload estimate remembers having counted (the last scored): a worker runs for months
SEEN_IDS = 100_000


def _node_terms(t: FragTables, snapshot: ClusterSnapshot,
                rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The nodes' own terms on ``rows``: free GPU milli, counts and usable milli per request group,
    ``F`` before the placement (kept per node table, the changed nodes recomputed)."""
    terms = t.node_terms(snapshot.gpu_free, snapshot.cpu_free)
    return terms.total[rows], terms.counts[rows], terms.usable[rows], terms.frag[rows]


def _distinct_free(free: np.ndarray, floor: int) -> np.ndarray:
    """``[R, D]``: each row's distinct free milli of at least ``floor``, largest first, padded with
    -1 (``D`` the most any row has). A sharing pod's score on a node is its best GPU's, and two GPUs
    with the same free milli give the same score: at 70 % load a node has 1–3 such values, not 8."""
    f = -np.sort(-np.where(free >= floor, free, -1), axis=1)
    f[:, 1:][f[:, 1:] == f[:, :-1]] = -1
    f = -np.sort(-f, axis=1)
    return f[:, : max(1, int((f >= 0).sum(axis=1).max(initial=0)))]


def _is_sharing(job: JobRequest) -> bool:
    return job.num_gpu == 1 and job.per_gpu_milli < FULL_GPU_MILLI


@register("fgd")
class FGD(BasePolicy):
    name = "fgd"

    def __init__(self, workload: Workload | Sequence[JobRequest] | None = None, *, quantize: bool = True,
                 coverage: float = 0.95) -> None:  # fmt: skip
        if workload is not None and not isinstance(workload, Workload):
            workload = Workload.from_jobs(workload, coverage)
        self.fixed_workload: Workload | None = workload
        self.quantize = quantize
        self.coverage = coverage
        self._seen: Counter[PodType] = Counter()
        self._seen_ids: OrderedDict[str, None] = OrderedDict()  # the ids counted, the SEEN_IDS last scored
        self._counted = 0  # pods counted into the estimate
        self._estimate: Workload | None = None
        self._next_refresh = 1
        self._tables: tuple[object, Workload, FragTables] | None = None

    # -- the target workload -----------------------------------------------------------------
    def workload(self, job: JobRequest | None = None) -> Workload | None:
        """The target workload (fixed, or estimated from the pods seen, ``job`` included)."""
        if self.fixed_workload is not None:
            return self.fixed_workload
        if job is not None:
            if job.job_id in self._seen_ids:
                self._seen_ids.move_to_end(job.job_id)  # (a job pending for long is scored every step: kept)
                return self._estimate
            self._seen_ids[job.job_id] = None
            if len(self._seen_ids) > SEEN_IDS:  # (found by review: a worker kept every job id it ever scored)
                self._seen_ids.popitem(last=False)
            self._seen[PodType.of(job)] += 1
            self._counted += 1
            if self._counted >= self._next_refresh:
                self._estimate = Workload.from_counts(dict(self._seen), self.coverage)
                self._next_refresh = self._counted + max(1, self._counted // 16)
        return self._estimate

    def tables(self, snapshot: ClusterSnapshot, workload: Workload) -> FragTables:
        cached = self._tables
        if cached is None or cached[0] is not snapshot.table or cached[1] is not workload:
            cached = self._tables = (snapshot.table, workload, FragTables(workload, snapshot.gpu_model))
        return cached[2]

    # -- scoring --------------------------------------------------------------------------------
    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        out = np.full(snapshot.num_nodes, -np.inf)
        rows = np.flatnonzero(feasible_mask)
        workload = self.workload(job)
        if len(rows) and workload is not None:
            out[rows] = self._evaluate(self.tables(snapshot, workload), snapshot, rows, job, gpus=False)[0]
        return out

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        """A sharing pod gets the GPU that increases fragmentation least; others best-fit."""
        workload = self.workload(job)
        if not _is_sharing(job) or workload is None:
            return best_fit_gpus(snapshot, node_index, job)
        scores, gpu = self._evaluate(self.tables(snapshot, workload), snapshot, np.array([node_index]), job)
        return None if scores[0] == -np.inf else (int(gpu[0]),)

    def _evaluate(self, t: FragTables, snapshot: ClusterSnapshot, rows: np.ndarray, job: JobRequest, *,
                  gpus: bool = True) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Scores of ``rows`` (``-inf`` where the pod does not fit) and, for a sharing pod, the
        chosen GPU per row (``gpus=False``: the scores alone, each node's GPUs of equal free milli
        tried once; the GPUs come back as -1)."""
        free = snapshot.gpu_free[rows].astype(np.int64)
        cpu = snapshot.cpu_free[rows]
        model = t.model_index[rows]
        total, counts, usable, before = _node_terms(t, snapshot, rows)
        weights_after = t.weights(model, cpu - request_cpu(job))
        none = np.full(len(rows), -1)
        if job.num_gpu == 0:
            return self._score(before - t.frag(total, weights_after, counts, usable)), none
        if not _is_sharing(job):  # whole GPUs: fully free ones, which fit every group
            k = job.num_gpu
            after = t.frag(total - FULL_GPU_MILLI * k, weights_after, counts - k, usable - FULL_GPU_MILLI * k)
            scores = self._score(before - after)
            scores[snapshot.gpu_full_free[rows] < k] = -np.inf
            return scores, none
        d = job.per_gpu_milli
        if not gpus:
            free = _distinct_free(free, d)
        left = free - d  # (R, G): the GPU's free milli after placing the pod on it
        old = free[..., None] >= t.key_milli  # (R, G, K)
        new = left[..., None] >= t.key_milli
        counts_after = counts[:, None, :] - old + new
        usable_after = usable[:, None, :] - old * free[..., None] + new * left[..., None]
        after = t.frag((total - d)[:, None], weights_after[:, None, :], counts_after, usable_after)
        scores = self._score(before[:, None] - after)
        scores[free < d] = -np.inf
        gpu = np.argmax(scores, axis=1)  # first maximum: lowest GPU index
        return scores[np.arange(len(rows)), gpu], gpu if gpus else none

    def score_many(self, jobs: Sequence[JobRequest], snapshot: ClusterSnapshot, rows: np.ndarray) -> np.ndarray:
        """``[len(jobs), len(rows)]``: :meth:`score` of each job on the nodes ``rows`` (``-inf`` where it
        does not fit), with the nodes' own terms computed once for all the jobs. Needs a fixed
        workload (an estimated one changes with every job scored)."""
        if self.fixed_workload is None:
            raise ValueError("score_many needs a fixed workload")
        t = self.tables(snapshot, self.fixed_workload)
        free = snapshot.gpu_free[rows].astype(np.int64)  # [R, G]
        cpu = snapshot.cpu_free[rows]
        model = t.model_index[rows]
        total, counts, usable, before = _node_terms(t, snapshot, rows)  # [R], [R, K], [R, K], [R]
        num = np.array([j.num_gpu for j in jobs], dtype=np.int64)
        per = np.array([j.per_gpu_milli for j in jobs], dtype=np.int64)
        after_w = t.weights(model, cpu - np.array([request_cpu(j) for j in jobs], dtype=np.int64)[:, None])  # [J, R, K]
        out = np.full((len(jobs), len(rows)), -np.inf)
        sharing = (num == 1) & (per < FULL_GPU_MILLI)
        if (a := np.flatnonzero(num == 0)).size:  # CPU-only: only the free cpu moves
            out[a] = self._score(before - t.frag(total, after_w[a], counts, usable))
        if (w := np.flatnonzero((num > 0) & ~sharing)).size:  # whole GPUs: k fully free ones
            k = num[w][:, None]
            after = t.frag(total - FULL_GPU_MILLI * k, after_w[w], counts - k[..., None],
                           usable - FULL_GPU_MILLI * k[..., None])  # fmt: skip
            out[w] = np.where(snapshot.gpu_full_free[rows] < k, -np.inf, self._score(before - after))
        if (h := np.flatnonzero(sharing)).size:  # a share of one GPU: the node's best GPU
            d = per[h][:, None, None]  # [H, 1, 1]
            free = _distinct_free(free, int(per[h].min()))  # GPUs with the same free milli score the same
            left = free - d  # [H, R, G]
            old = free[..., None] >= t.key_milli  # [R, G, K]
            new = left[..., None] >= t.key_milli  # [H, R, G, K]
            counts_after = counts[:, None, :] - old + new
            usable_after = usable[:, None, :] - old * free[..., None] + new * left[..., None]
            after = t.frag((total - d[..., 0])[..., None], after_w[h][:, :, None, :], counts_after, usable_after)
            scores = self._score(before[:, None] - after)
            scores[free < d] = -np.inf
            out[h] = scores.max(axis=2)
        return out

    def _score(self, decrease: np.ndarray) -> np.ndarray:
        s = 100.0 / (1.0 + np.exp(-decrease / 1000.0))
        return np.floor(s) if self.quantize else s
