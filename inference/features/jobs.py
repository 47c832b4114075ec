"""The job demand q_t: one float32 row per job (names in :mod:`inference.features.spec`).

Resources (normalised), per-GPU share, GPU count, sharing / CPU-only flags, priority, the
time waited (``log1p(seconds) / 10``), the predicted duration when the submission carries an
estimate (``runtime_estimate_s``; never the trace's recorded duration, which is the outcome),
whether GPU models are constrained, QoS one-hot, and the text embedding of the job's free text
(outcome labels stripped, :mod:`inference.encoders.text`).
"""

from __future__ import annotations

from collections.abc import Sequence

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
        np.log1p(np.maximum(now - submit, 0.0)) / 10.0, np.log1p(np.maximum(dur, 0.0)) / 15.0, dur >= 0, constrained,
    ], axis=1).astype(np.float32)  # fmt: skip
    qos = np.zeros((n, len(spec.qos_classes) + 1), dtype=np.float32)
    index = {q: i for i, q in enumerate(spec.qos_classes)}
    qos[np.arange(n), [index.get(j.qos, len(spec.qos_classes)) for j in jobs]] = 1.0
    text = encoder.encode([j.text for j in jobs]).reshape(n, spec.text_dim)
    return np.concatenate([base, qos, text], axis=1)
