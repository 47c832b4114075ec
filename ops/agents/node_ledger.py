"""What a cluster agent knows about its nodes: capacity and what each running job holds.

The agent is the last line of defence: it checks every command against its own ledger
and refuses one that would over-commit a node, whatever the scheduler believed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.events import NodeTelemetry, PlacementCommand


@dataclass
class NodeLedger:
    node_id: str
    cluster: str
    cpu_milli: int
    memory_mib: int
    gpu_model: str | None
    gpu_alloc: list[int]  # milli per GPU
    cpu_alloc: int = 0
    mem_alloc: int = 0
    healthy: bool = True
    topology: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, PlacementCommand] = field(default_factory=dict)  # by decision id

    @classmethod
    def from_inventory(cls, t: NodeTelemetry) -> NodeLedger:
        return cls(node_id=t.node_id, cluster=t.cluster, cpu_milli=t.cpu_milli, memory_mib=t.memory_mib,
                   gpu_model=t.gpu_model, gpu_alloc=[0] * t.num_gpu, healthy=t.healthy,
                   topology=dict(t.topology))  # fmt: skip

    def refuse(self, cmd: PlacementCommand) -> str | None:
        """Why ``cmd`` cannot run here, or ``None`` when it fits."""
        if not self.healthy:
            return f"node {self.node_id} is not healthy"
        if self.cpu_alloc + cmd.cpu_milli > self.cpu_milli:
            return f"cpu over-commit on {self.node_id}: {self.cpu_alloc}+{cmd.cpu_milli} > {self.cpu_milli} milli"
        if self.mem_alloc + cmd.memory_mib > self.memory_mib:
            return f"memory over-commit on {self.node_id}: {self.mem_alloc}+{cmd.memory_mib} > {self.memory_mib} MiB"
        if len(set(cmd.gpu_indices)) != len(cmd.gpu_indices):
            return f"GPU indices repeat: {cmd.gpu_indices}"
        for g in cmd.gpu_indices:
            if not 0 <= g < len(self.gpu_alloc):
                return f"node {self.node_id} has no GPU {g} (it has {len(self.gpu_alloc)})"
            if self.gpu_alloc[g] + cmd.gpu_milli_per_gpu > 1000:
                return (f"GPU {g} over-commit on {self.node_id}: "
                        f"{self.gpu_alloc[g]}+{cmd.gpu_milli_per_gpu} > 1000 milli")  # fmt: skip
        if cmd.gpu_milli_per_gpu and not cmd.gpu_indices:
            return "GPU share requested but no GPU index given"
        return None

    def allocate(self, cmd: PlacementCommand) -> None:
        self.cpu_alloc += cmd.cpu_milli
        self.mem_alloc += cmd.memory_mib
        for g in cmd.gpu_indices:
            self.gpu_alloc[g] += cmd.gpu_milli_per_gpu
        self.jobs[cmd.decision_id] = cmd

    def release(self, decision_id: str) -> PlacementCommand | None:
        """Free what decision ``decision_id`` holds here (``None`` if it holds nothing)."""
        cmd = self.jobs.pop(decision_id, None)
        if cmd is not None:
            self.cpu_alloc -= cmd.cpu_milli
            self.mem_alloc -= cmd.memory_mib
            for g in cmd.gpu_indices:
                self.gpu_alloc[g] -= cmd.gpu_milli_per_gpu
        return cmd

    def decisions_of(self, job_id: str) -> list[str]:
        return [d for d, c in self.jobs.items() if c.job_id == job_id]

    def telemetry(self) -> NodeTelemetry:
        gpus = len(self.gpu_alloc)
        return NodeTelemetry(
            node_id=self.node_id, cluster=self.cluster, source="agent", cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib, num_gpu=gpus, gpu_model=self.gpu_model, cpu_alloc_milli=self.cpu_alloc,
            memory_alloc_mib=self.mem_alloc, gpu_alloc_milli=list(self.gpu_alloc),
            cpu_util=self.cpu_alloc / self.cpu_milli if self.cpu_milli else 0.0,
            gpu_util=sum(self.gpu_alloc) / (1000 * gpus) if gpus else 0.0,
            healthy=self.healthy, topology=dict(self.topology),
        )  # fmt: skip
