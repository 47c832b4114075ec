"""Resource vectors: what a job asks for and what a node offers.

A request is ``cpu_milli`` (1/1000 core), ``memory_mib``, ``num_gpu`` and the share of
each of those GPUs in milli-GPU (``per_gpu_milli``, 1..1000; 1000 = a whole GPU). A
fractional share (< 1000) must fit on one physical GPU, which is why GPUs are never
pooled into a single number for feasibility — only for scoring and reporting.
"""

from __future__ import annotations

from dataclasses import dataclass

FULL_GPU_MILLI = 1000


def normalise_per_gpu_milli(num_gpu: int, gpu_milli: int) -> int:
    """The per-GPU share a request really holds: 0 without GPUs, 1000 when unset (0)."""
    if num_gpu <= 0:
        return 0
    if gpu_milli <= 0 or gpu_milli > FULL_GPU_MILLI:
        return FULL_GPU_MILLI
    return gpu_milli


@dataclass(frozen=True, slots=True)
class Resources:
    """A resource vector. ``per_gpu_milli`` is normalised (0 without GPUs, else 1..1000)."""

    cpu_milli: int = 0
    memory_mib: int = 0
    num_gpu: int = 0
    per_gpu_milli: int = 0

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0:
            raise ValueError(f"negative resources: {self}")
        if self.per_gpu_milli < 0 or self.per_gpu_milli > FULL_GPU_MILLI:
            raise ValueError(f"per_gpu_milli must be within 0..{FULL_GPU_MILLI}, got {self.per_gpu_milli}")
        object.__setattr__(self, "per_gpu_milli", normalise_per_gpu_milli(self.num_gpu, self.per_gpu_milli))

    @property
    def gpu_milli(self) -> int:
        """Total milli-GPUs held: ``num_gpu × per_gpu_milli``."""
        return self.num_gpu * self.per_gpu_milli

    @property
    def is_fractional(self) -> bool:
        """True for a GPU-sharing request (a part of one GPU)."""
        return self.num_gpu > 0 and self.per_gpu_milli < FULL_GPU_MILLI

    def dominant_share(self, capacity: Resources) -> float:
        """The largest fraction of ``capacity`` this request takes (DRF's dominant share)."""
        shares = [
            _ratio(self.cpu_milli, capacity.cpu_milli),
            _ratio(self.memory_mib, capacity.memory_mib),
            _ratio(self.gpu_milli, capacity.num_gpu * FULL_GPU_MILLI),
        ]
        return max(shares)

    def __str__(self) -> str:
        return format_resources(self.cpu_milli, self.memory_mib, self.num_gpu, self.per_gpu_milli)


def _ratio(part: int, whole: int) -> float:
    if whole <= 0:
        return 0.0 if part <= 0 else float("inf")
    return part / whole


def format_resources(cpu_milli: int, memory_mib: int, num_gpu: int = 0, per_gpu_milli: int = 0) -> str:
    """Human text, e.g. ``cpu=6000m mem=12288Mi gpu=1x460m``."""
    text = f"cpu={cpu_milli}m mem={memory_mib}Mi"
    if num_gpu:
        text += f" gpu={num_gpu}x{normalise_per_gpu_milli(num_gpu, per_gpu_milli)}m"
    return text
