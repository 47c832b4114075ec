"""What the duration predictor reads of a job: its text embedding and its resource shape.

Two blocks per job, both float32 and computed batch-wise:

- **text** — the encoder's vector of :func:`duration_text`: the job's free text with the
  outcome labels stripped (:func:`inference.encoders.text.clean_text`, e.g. openb's
  ``pod_phase``, dlrm's ``lifetime``), without the parts that only name *this* job (a part
  equal to the job id, such as a pod or instance serial, and the ``task_index`` label: they
  are unique per job, so they tell nothing about another job and only add noise to the
  similarity; a simulator replica ``<id>#<k>`` counts as its original), plus ``user=<user>``
  when the submission names a user;
- **shape** (:data:`SHAPE_NAMES`) — log-scaled cpu / memory / GPU demand, the per-GPU
  share, sharing and CPU-only flags, QoS one-hot, priority, GPU-model constraint, the
  anti-affinity limit, the gang size and the submitter's runtime estimate when declared.

Never read: ``trace_duration_s`` (the answer), ``submit_time`` and ``attempt`` (when, not
what). A model trained on one encoder's vectors must be served with the same encoder: the
encoder name is saved with the model (:mod:`inference.duration.io`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from inference.encoders.base import TextEncoder
from inference.encoders.text import clean_text
from scheduling.job import JobRequest

#: labels that identify one job among its siblings (unique per job: noise for similarity)
PER_JOB_LABELS: frozenset[str] = frozenset({"task_index"})
#: the simulator's superposed replicas of a trace are ``<job id>#<k>`` (scheduling.simulator.workload)
REPLICA_MARK = "#"
QOS: tuple[str, ...] = ("LS", "BE", "Burstable", "Guaranteed")
SHAPE_NAMES: tuple[str, ...] = (
    "log_cores", "log_mem_gib", "num_gpu", "per_gpu", "log_gpu_demand", "sharing", "cpu_only",
    *(f"qos_{q}" for q in QOS), "qos_other", "priority", "model_constrained", "max_per_node",
    "log_gang", "log_estimate", "has_estimate",
)  # fmt: skip
SHAPE_DIM = len(SHAPE_NAMES)


def duration_text(job: JobRequest) -> str:
    """The text the encoder embeds for ``job`` (see the module docstring)."""
    parts = [p for p in clean_text(job.text).split(" | ") if p]
    own = {job.job_id, job.job_id.split(REPLICA_MARK, 1)[0]}  # a simulator replica ("id#1") names its original
    kept = [p for p in parts if p not in own and p.split("=", 1)[0] not in PER_JOB_LABELS]
    if job.user:
        kept.append(f"user={job.user}")
    return " | ".join(kept)


def shape_features(jobs: Sequence[JobRequest]) -> np.ndarray:
    """float32 ``[len(jobs), SHAPE_DIM]`` (names in :data:`SHAPE_NAMES`)."""
    out = np.zeros((len(jobs), SHAPE_DIM), dtype=np.float32)
    qos_index = {q: i for i, q in enumerate(QOS)}
    for i, j in enumerate(jobs):
        est = j.runtime_estimate_s
        row = out[i]
        row[0] = math.log1p(j.cpu_milli / 1000.0)
        row[1] = math.log1p(j.memory_mib / 1024.0)
        row[2] = j.num_gpu / 8.0
        row[3] = j.per_gpu_milli / 1000.0
        row[4] = math.log1p(j.num_gpu * j.per_gpu_milli / 1000.0)
        row[5] = float(j.num_gpu == 1 and 0 < j.per_gpu_milli < 1000)
        row[6] = float(j.num_gpu == 0)
        row[7 + qos_index.get(j.qos, len(QOS))] = 1.0
        base = 8 + len(QOS)
        row[base] = max(-1.0, min(1.0, j.priority / 10.0))
        row[base + 1] = float(bool(j.gpu_models))
        row[base + 2] = 0.0 if j.max_instances_per_node is None else 1.0 / j.max_instances_per_node
        row[base + 3] = math.log1p(max(j.gang_size, 1) - 1)
        row[base + 4] = math.log1p(max(est, 0.0)) / 10.0 if est is not None else 0.0
        row[base + 5] = float(est is not None)
    return out


class JobFeaturiser:
    """Text vectors and shape rows for a batch of jobs; ``encoder`` should be an
    :class:`~inference.encoders.EncoderCache` (each distinct text is encoded once)."""

    def __init__(self, encoder: TextEncoder) -> None:
        self.encoder = encoder

    @property
    def text_dim(self) -> int:
        return self.encoder.dim

    def text(self, jobs: Sequence[JobRequest]) -> np.ndarray:
        """float32 ``[n, text_dim]``, rows unit length (zero for an empty text)."""
        if not jobs:
            return np.zeros((0, self.text_dim), dtype=np.float32)
        return np.asarray(self.encoder.encode([duration_text(j) for j in jobs]), dtype=np.float32)

    def __call__(self, jobs: Sequence[JobRequest]) -> tuple[np.ndarray, np.ndarray]:
        """``(text [n, text_dim], shape [n, SHAPE_DIM])``."""
        return self.text(jobs), shape_features(jobs)
