"""``NodeView``: one node's capacity, labels and (optionally) current allocation.

The input row of :meth:`ClusterSnapshot.from_nodes`. Built from inventory rows, from
:class:`~scheduling.events.NodeTelemetry`, or by hand in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.events import NodeTelemetry
from scheduling.resources import FULL_GPU_MILLI


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node. ``*_alloc*`` fields are what is already held on it (0 = empty node)."""

    node_id: str
    cluster: str = "default"
    cpu_milli: int = 0
    memory_mib: int = 0
    num_gpu: int = 0
    gpu_model: str | None = None
    healthy: bool = True
    topology: dict[str, str] = field(default_factory=dict)
    cpu_alloc_milli: int = 0
    memory_alloc_mib: int = 0
    gpu_alloc_milli: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0:
            raise ValueError(f"node {self.node_id}: negative capacity")
        if self.gpu_alloc_milli and len(self.gpu_alloc_milli) != self.num_gpu:
            raise ValueError(f"node {self.node_id}: gpu_alloc_milli needs one entry per GPU")
        if any(not 0 <= m <= FULL_GPU_MILLI for m in self.gpu_alloc_milli):
            raise ValueError(f"node {self.node_id}: gpu_alloc_milli entries must be within 0..1000")
        object.__setattr__(self, "gpu_alloc_milli", tuple(self.gpu_alloc_milli))

    @classmethod
    def from_telemetry(cls, t: NodeTelemetry, *, with_allocation: bool = True) -> NodeView:
        """The node a telemetry event describes; ``with_allocation=False`` keeps it empty."""
        return cls(
            node_id=t.node_id,
            cluster=t.cluster,
            cpu_milli=t.cpu_milli,
            memory_mib=t.memory_mib,
            num_gpu=t.num_gpu,
            gpu_model=t.gpu_model,
            healthy=t.healthy,
            topology=dict(t.topology),
            cpu_alloc_milli=t.cpu_alloc_milli if with_allocation else 0,
            memory_alloc_mib=t.memory_alloc_mib if with_allocation else 0,
            gpu_alloc_milli=tuple(t.gpu_alloc_milli) if with_allocation else (),
        )
