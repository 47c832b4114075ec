"""Feature names and dimensions, in one place.

A trained model is only valid with the featurisation it was trained on, so the
:class:`FeatureSpec` (GPU model vocabulary, QoS classes, text encoder, normalisers) is
saved into the model's ``config.json`` and rebuilt from it at load time.

Normalisers are fixed constants (not fitted), so a feature means the same thing on every
cluster: cpu in units of 128 cores, memory of 1 TiB, GPUs of 8 (the largest openb node).

Three groups:

- **node** (``NODE_BASE`` + one-hot GPU model + ``util`` if given): the node state s_t;
- **job** (``JOB_BASE`` + one-hot QoS + the text embedding): the demand q_t;
- **pair** (``PAIR``): one (job, node) action computed on the node's CURRENT free
  capacity — what is left after placing the job there (see :mod:`inference.features.pairs`).

Two optional extensions (off by default, so a ``config.json`` without the keys means the
original layout and old models keep loading):

- ``cluster=True`` appends ``CLUSTER`` to the node row (:mod:`inference.features.cluster`):
  the node's priority (its index: ties go to the lowest) and cluster-level context broadcast
  to every node (share of whole free nodes of the node's GPU model, …), and the priority to
  the pair row too (``CLUSTER_PAIR``: the head then sees it directly, not through the encoder);
- ``workload=((cpu, per_gpu_milli, num_gpu, models, weight), …)`` — the target workload FGD
  uses (:class:`scheduling.metrics.fragmentation.Workload`), saved with the model — appends
  ``FRAG_NODE`` to the node row and ``FRAG_PAIR`` to the pair row: the node's fragmentation
  and the fragmentation change of placing the job there, FGD's own score and pick included
  (the model starts from FGD's decision and can learn where to deviate from it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CPU_UNIT = 128_000.0  # milli-cpu
MEM_UNIT = 1_048_576.0  # MiB
GPU_UNIT = 8.0  # GPUs
FULL = 1000.0  # milli-GPU of one GPU

NODE_BASE: tuple[str, ...] = (
    "cpu_cap", "mem_cap", "num_gpu",  # capacity (normalised by the units above)
    "cpu_free_frac", "mem_free_frac", "gpu_free_frac",  # free / capacity (0 without the resource)
    "gpu_full_free_frac", "gpu_max_free", "gpu_partial_frac",  # fully free GPUs / num_gpu, largest free share, partly used GPUs / num_gpu
    "cpu_per_free_gpu",  # free cpu per free GPU (units of 16 cores, clipped at 4): can the free GPUs still be fed?
    "healthy", "has_gpu",
)  # fmt: skip
JOB_BASE: tuple[str, ...] = (
    "cpu", "mem", "num_gpu", "per_gpu", "gpu_demand", "sharing", "cpu_only",
    "priority", "log_waited", "log_duration", "has_duration", "model_constrained",
)  # fmt: skip
#: the leading job columns that are functions of the job's resources alone (its shape:
#: ``inference.features.pairs.pair_shape``), which is all the pair features depend on
SHAPE_COLUMNS = 7
assert JOB_BASE[SHAPE_COLUMNS - 1] == "cpu_only" and JOB_BASE[SHAPE_COLUMNS] == "priority"
PAIR: tuple[str, ...] = (
    "cpu_left_frac", "mem_left_frac", "gpu_left_frac",  # free after placement / capacity
    "full_free_after_frac", "max_free_after",  # fully free GPUs left / num_gpu; largest free share left
    "gpu_hole",  # sharing pod: free milli left on the best-fit GPU (0 = it fills it exactly)
    "lands_on_partial",  # sharing pod: the best-fit GPU was already partly used
    "partial_after_frac",  # partly used GPUs after / num_gpu
    "cpu_per_free_gpu_after",  # free cpu per free GPU after placement
    "was_empty",  # nothing allocated on the node before
    "cpu_used_frac", "gpu_used_frac",  # before placement
)  # fmt: skip
QOS_CLASSES: tuple[str, ...] = ("LS", "BE", "Burstable", "Guaranteed")
CLUSTER: tuple[str, ...] = (
    "priority",  # index / (N - 1): the scheduler's tie-break (lowest index first) — the node order
    "model_empty_share",  # share of the nodes of this node's GPU model that are entirely free
    "model_gpu_free_share",  # free GPU milli / GPU capacity over the nodes of this node's model
    "cluster_gpu_used",  # allocated share of the cluster's GPUs
    "cluster_empty_big_share",  # share of the largest (8-GPU) nodes that are entirely free
)  # fmt: skip
FRAG_NODE: tuple[str, ...] = (
    "frag_frac",  # F_n(M) / the node's GPU capacity
    "cluster_frag_rate",  # Σ F_n / free GPU milli (broadcast)
)  # fmt: skip
FRAG_PAIR: tuple[str, ...] = (
    "frag_delta",  # (F_after - F_before) / 8000: the fragmentation this placement adds (GPU-fit only)
    "fgd_score",  # FGD's quantised score / 100 (0 where the job's GPUs do not fit)
    "fgd_best",  # FGD's score equals the best over the nodes the job fits (FGD's tie set)
    "fgd_first",  # the first node of that tie set: FGD's own pick (ties go to the lowest index)
)  # fmt: skip
CLUSTER_PAIR: tuple[str, ...] = ("priority",)  # the node's index / (N - 1), beside the pair features
#: one target-workload type: (cpu_milli, per_gpu_milli, num_gpu, gpu_models, weight)
WorkloadRow = tuple[int, int, int, tuple[str, ...], float]


@dataclass(frozen=True)
class FeatureSpec:
    gpu_models: tuple[str, ...] = ()  # one-hot vocabulary; unknown models go to "other"
    qos_classes: tuple[str, ...] = QOS_CLASSES  # one-hot; unknown go to "other"
    encoder: str = "hashed-ngram-32"  # text encoder name (inference.encoders.get_encoder)
    text_dim: int = 32
    utilisation: bool = False  # a hopping-window utilisation column in s_t
    extra: dict[str, Any] = field(default_factory=dict)
    cluster: bool = False  # append CLUSTER to s_t
    workload: tuple[WorkloadRow, ...] = ()  # FGD's target workload: append FRAG_NODE / FRAG_PAIR

    @property
    def node_names(self) -> tuple[str, ...]:
        models = tuple(f"model={m}" for m in self.gpu_models) + ("model=other",)
        return (NODE_BASE + models + (("utilisation",) if self.utilisation else ())
                + (CLUSTER if self.cluster else ()) + (FRAG_NODE if self.workload else ()))  # fmt: skip

    @property
    def job_names(self) -> tuple[str, ...]:
        qos = tuple(f"qos={q}" for q in self.qos_classes) + ("qos=other",)
        return JOB_BASE + qos + tuple(f"text{i}" for i in range(self.text_dim))

    @property
    def pair_names(self) -> tuple[str, ...]:
        return PAIR + (CLUSTER_PAIR if self.cluster else ()) + (FRAG_PAIR if self.workload else ())

    @property
    def node_dim(self) -> int:
        return len(self.node_names)

    @property
    def job_dim(self) -> int:
        return len(self.job_names)

    @property
    def pair_dim(self) -> int:
        return len(self.pair_names)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpu_models"], d["qos_classes"] = list(self.gpu_models), list(self.qos_classes)
        d["workload"] = [[c, p, n, list(m), w] for c, p, n, m, w in self.workload]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FeatureSpec:
        d = dict(d)
        d["gpu_models"] = tuple(d.get("gpu_models", ()))
        d["qos_classes"] = tuple(d.get("qos_classes", QOS_CLASSES))
        d["workload"] = tuple((int(c), int(p), int(n), tuple(m), float(w)) for c, p, n, m, w in d.get("workload", ()))
        return cls(**d)

    @staticmethod
    def workload_rows(workload: Any) -> tuple[WorkloadRow, ...]:
        """A :class:`scheduling.metrics.fragmentation.Workload` as the spec stores it."""
        return tuple((t.cpu_milli, t.per_gpu_milli, t.num_gpu, tuple(t.gpu_models), float(w))
                     for t, w in zip(workload.types, workload.weights, strict=True))  # fmt: skip
