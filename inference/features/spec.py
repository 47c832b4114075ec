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


@dataclass(frozen=True)
class FeatureSpec:
    gpu_models: tuple[str, ...] = ()  # one-hot vocabulary; unknown models go to "other"
    qos_classes: tuple[str, ...] = QOS_CLASSES  # one-hot; unknown go to "other"
    encoder: str = "hashed-ngram-32"  # text encoder name (inference.encoders.get_encoder)
    text_dim: int = 32
    utilisation: bool = False  # a hopping-window utilisation column in s_t
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def node_names(self) -> tuple[str, ...]:
        models = tuple(f"model={m}" for m in self.gpu_models) + ("model=other",)
        return NODE_BASE + models + (("utilisation",) if self.utilisation else ())

    @property
    def job_names(self) -> tuple[str, ...]:
        qos = tuple(f"qos={q}" for q in self.qos_classes) + ("qos=other",)
        return JOB_BASE + qos + tuple(f"text{i}" for i in range(self.text_dim))

    @property
    def pair_names(self) -> tuple[str, ...]:
        return PAIR

    @property
    def node_dim(self) -> int:
        return len(self.node_names)

    @property
    def job_dim(self) -> int:
        return len(self.job_names)

    @property
    def pair_dim(self) -> int:
        return len(PAIR)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpu_models"], d["qos_classes"] = list(self.gpu_models), list(self.qos_classes)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FeatureSpec:
        d = dict(d)
        d["gpu_models"] = tuple(d.get("gpu_models", ()))
        d["qos_classes"] = tuple(d.get("qos_classes", QOS_CLASSES))
        return cls(**d)
