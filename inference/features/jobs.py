"""The job demand q_t: one float32 row per job (names in :mod:`inference.features.spec`).

Resources (normalised), per-GPU share, GPU count, sharing / CPU-only flags, priority, the
time waited (``log1p(seconds) / 10``), the predicted duration when the submission carries an
estimate (``runtime_estimate_s``; never the trace's recorded duration, which is the outcome),
whether GPU models are constrained, QoS one-hot, and the text embedding of the job's free text
(outcome labels stripped, :mod:`inference.encoders.text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from inference.encoders.base import TextEncoder
from inference.features.spec import CPU_UNIT, FULL, GPU_UNIT, MEM_UNIT, FeatureSpec
from scheduling.job import JobRequest


def job_demand(jobs: Sequence[JobRequest], now: float, spec: FeatureSpec, encoder: TextEncoder) -> np.ndarray:
    """float32 ``[len(jobs), spec.job_dim]``; ``encoder`` (an :class:`EncoderCache` in a loop) embeds the texts."""
    n = len(jobs)
    if encoder.dim != spec.text_dim:
        raise ValueError(f"encoder dim {encoder.dim} != the spec's text_dim {spec.text_dim}")
    num = np.array([[j.cpu_milli, j.memory_mib, j.num_gpu, j.per_gpu_milli, j.priority, j.submit_time,
                     -1.0 if j.runtime_estimate_s is None else j.runtime_estimate_s, bool(j.gpu_models)]
                    for j in jobs], dtype=np.float64).reshape(n, 8)  # fmt: skip
    cpu, mem, ngpu, per, prio, submit, dur, constrained = num.T
    base = np.stack([
        cpu / CPU_UNIT, mem / MEM_UNIT, ngpu / GPU_UNIT, per / FULL, ngpu * per / (FULL * GPU_UNIT),
        (ngpu == 1) & (per < FULL), ngpu == 0, np.clip(prio / 10.0, -1.0, 1.0),
        waited(submit, now), np.log1p(np.maximum(dur, 0.0)) / 15.0, dur >= 0, constrained,
    ], axis=1).astype(np.float32)  # fmt: skip
    qos = np.zeros((n, len(spec.qos_classes) + 1), dtype=np.float32)
    index = {q: i for i, q in enumerate(spec.qos_classes)}
    qos[np.arange(n), [index.get(j.qos, len(spec.qos_classes)) for j in jobs]] = 1.0
    text = encoder.encode([j.text for j in jobs]).reshape(n, spec.text_dim)
    return np.concatenate([base, qos, text], axis=1)


WAITED = 8  # the time-waited column: the only one that changes while a job is pending


def waited(submit: np.ndarray, now: float) -> np.ndarray:
    """The time-waited column (``log1p(seconds) / 10``) for these submit times."""
    return (np.log1p(np.maximum(now - submit, 0.0)) / 10.0).astype(np.float32)


class JobRows:
    """:func:`job_demand` kept from step to step. A pending job's row changes only in the time it
    has waited, so a step computes whole only the rows of jobs it has not seen (their texts
    embedded then), and the waited column of all: the same array, bit for bit (a test holds it).
    A row is kept per job id together with the job object: a job resubmitted under the same id
    is another object and is computed again (the worker keeps one object per pending job; two
    objects under one id in the same call get the row of the later one, as before).
    The rows sit in one array, gathered once per step (stacking 256 row arrays cost ~0.14 ms).
    Starts over with another spec or encoder, and when it holds ``max_jobs`` rows."""

    def __init__(self, max_jobs: int = 50_000) -> None:
        self.max_jobs = max_jobs
        self._key: tuple[Any, Any] | None = None
        self._at: dict[str, tuple[JobRequest, int]] = {}  # job id -> (the job, its row in _buf)
        self._buf = np.zeros((0, 0), np.float32)
        self._used = 0  # rows of _buf written

    def __call__(self, jobs: Sequence[JobRequest], now: float, spec: FeatureSpec, encoder: TextEncoder) -> np.ndarray:
        if self._key is None or self._key[0] is not spec or self._key[1] is not encoder:
            self._key, self._at, self._used = (spec, encoder), {}, 0
            self._buf = np.zeros((16, spec.job_dim), np.float32)  # grows by doubling
        at = self._at
        new = [j for j in jobs if (hit := at.get(j.job_id)) is None or hit[0] is not j]
        if self._used + len(new) > self.max_jobs:  # full: keep this call's jobs only
            kept = {j.job_id: at[j.job_id] for j in jobs if j.job_id in at and at[j.job_id][0] is j}
            rows = np.array([i for _, i in kept.values()], dtype=np.int64)
            self._buf[: len(rows)] = self._buf[rows]
            self._at = at = {job_id: (job, k) for k, (job_id, (job, _)) in enumerate(kept.items())}
            self._used = len(rows)
        if new:
            fresh = job_demand(new, now, spec, encoder)
            if self._used + len(new) > len(self._buf):
                grown = np.zeros((max(2 * len(self._buf), self._used + len(new)), spec.job_dim), np.float32)
                grown[: self._used] = self._buf[: self._used]
                self._buf = grown
            self._buf[self._used : self._used + len(new)] = fresh
            for k, j in enumerate(new):
                at[j.job_id] = (j, self._used + k)
            self._used += len(new)
        if not jobs:
            return np.zeros((0, spec.job_dim), np.float32)
        out = self._buf[[at[j.job_id][1] for j in jobs]]
        out[:, WAITED] = waited(np.array([j.submit_time for j in jobs], dtype=np.float64), now)
        return out
